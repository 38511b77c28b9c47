import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

/** A cookie-keeping HTTP client for the console's forms, without a browser: what a no-JavaScript user agent does. */
export class WebClient {
  readonly cookies = new Map<string, string>();
  /** Raw Set-Cookie headers seen, for checking their flags. */
  readonly setCookies: string[] = [];
  lastHtml = "";

  constructor(readonly baseUrl: string) {}

  private remember(response: Response) {
    for (const header of response.headers.getSetCookie()) {
      this.setCookies.push(header);
      const [pair] = header.split(";");
      const index = pair!.indexOf("=");
      const name = pair!.slice(0, index);
      const value = pair!.slice(index + 1);
      if (value === "" || /max-age=0/i.test(header)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  private headers(extra: Record<string, string> = {}) {
    const cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    return { ...(cookie ? { cookie } : {}), ...extra };
  }

  async get(path: string): Promise<Response> {
    const response = await fetch(new URL(path, this.baseUrl), { headers: this.headers(), redirect: "manual" });
    this.remember(response);
    if ((response.headers.get("content-type") ?? "").includes("text/html")) this.lastHtml = await response.clone().text();
    return response;
  }

  /** The CSRF token of the last page fetched. */
  get csrf(): string {
    return this.lastHtml.match(/name="csrf" value="([^"]+)"/)?.[1] ?? this.cookies.get("vigil_csrf") ?? "";
  }

  /** Posts a form; the CSRF token of the last page is added unless `fields.csrf` is given (null leaves it out). */
  async post(path: string, fields: Record<string, string | null>, extraHeaders: Record<string, string> = {}): Promise<Response> {
    const form = new URLSearchParams();
    const withCsrf = { csrf: this.csrf, ...fields };
    for (const [key, value] of Object.entries(withCsrf)) if (value !== null) form.set(key, value);
    const response = await fetch(new URL(path, this.baseUrl), {
      method: "POST",
      headers: this.headers({ "content-type": "application/x-www-form-urlencoded", ...extraHeaders }),
      body: form.toString(),
      redirect: "manual",
    });
    this.remember(response);
    if ((response.headers.get("content-type") ?? "").includes("text/html")) this.lastHtml = await response.clone().text();
    return response;
  }
}

/** Waits for a mail to `to` in the outbox and returns its decoded text. */
export async function outboxMail(dataDir: string, to: string, subject: RegExp = /./): Promise<string> {
  const outbox = join(dataDir, "outbox");
  for (let i = 0; i < 200; i++) {
    const files = (await readdir(outbox).catch(() => [] as string[])).filter((name) => name.endsWith(".eml")).sort();
    for (const file of files.reverse()) {
      const text = (await readFile(join(outbox, file), "utf8")).replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
      if (text.includes(`To: ${to}`) && subject.test(text)) return text;
    }
    await Bun.sleep(25);
  }
  throw new Error(`no mail to ${to}`);
}

export const linkIn = (mail: string, path: string) => mail.match(new RegExp(`https?://[^\\s]+${path}[A-Za-z0-9_-]+`))?.[0] ?? "";
