// /docs on a host without internet access: the reference UI's assets come from Vigil itself, and the page renders
// in a real browser that may reach nothing but Vigil.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { chromium, type Browser } from "playwright-core";
import { sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

let browser: Browser | null = null;
afterAll(async () => {
  await browser?.close();
});

test("the API reference renders with every request kept on Vigil's own origin", async () => {
  const vigil = await sharedVigil();
  const origin = new URL(vigil.url).origin;
  const html = await (await fetch(`${origin}/docs`)).text();
  expect(html).not.toMatch(/(src|href)="https?:/);

  browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage();
  const elsewhere: string[] = [];
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    elsewhere.push(url);
    return route.abort();
  });
  await page.goto(`${origin}/docs`);
  await page.waitForSelector(".swagger-ui .info .title", { timeout: 30_000 });
  expect(await page.textContent(".swagger-ui .info .title")).toContain("Vigil API");
  // The operations of the spec are listed, so the spec loaded from /openapi.json too.
  await page.waitForSelector(".opblock", { timeout: 30_000 });
  expect(elsewhere).toEqual([]);

  expect((await fetch(`${origin}/docs/assets/swagger-ui-bundle.js`)).headers.get("content-type")).toContain("javascript");
  const unknown = await fetch(`${origin}/docs/assets/..%2Fpackage.json`);
  expect(unknown.status).toBe(404);
}, 180_000);
