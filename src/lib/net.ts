import { createServer, isIP, type BlockList } from "node:net";

/** A loopback port free at the time of asking. */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Adds an address ("10.0.0.7") or CIDR range ("10.0.0.0/8", "fd00::/8") to the list; false when malformed. */
export function addAddressRange(list: BlockList, entry: string): boolean {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  const type = family === 4 ? "ipv4" : "ipv6";
  if (prefix === undefined) {
    list.addAddress(address, type);
    return true;
  }
  const bits = Number(prefix);
  if (!/^\d+$/.test(prefix) || bits > (family === 4 ? 32 : 128)) return false;
  list.addSubnet(address, bits, type);
  return true;
}

/** An `X-Forwarded-For` entry as a bare address: without `[…]` around IPv6 or a `:port` after IPv4. */
function forwardedAddress(hop: string): string | null {
  const bracketed = hop.match(/^\[([^\]]+)\](?::\d+)?$/)?.[1];
  const address = bracketed ?? hop.replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, "$1");
  return isIP(address) ? address : null;
}

const isTrusted = (proxies: BlockList, address: string) => proxies.check(address, isIP(address) === 4 ? "ipv4" : "ipv6");

/**
 * The address of the client a request comes from. Behind trusted proxies that is the rightmost
 * `X-Forwarded-For` hop not itself a trusted proxy: everything left of it was written by the client,
 * who may put anything there. A peer not trusted is the client, whatever the header says.
 */
export function clientAddress(peer: string | null, forwardedFor: string | null, trustedProxies: BlockList | null): string | null {
  if (!peer || !trustedProxies || !isIP(peer) || !isTrusted(trustedProxies, peer)) return peer;
  let client = peer;
  const hops = (forwardedFor ?? "").split(",").map((hop) => hop.trim()).filter(Boolean);
  for (const hop of hops.reverse()) {
    const address = forwardedAddress(hop);
    // An entry that is no address ends the walk at the proxy that wrote it.
    if (!address) return client;
    client = address;
    if (!isTrusted(trustedProxies, address)) return client;
  }
  return client;
}
