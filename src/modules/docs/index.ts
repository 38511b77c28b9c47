import { Elysia, t } from "elysia";
import { dirname, join } from "node:path";

/**
 * The interactive API reference at /docs loads its script and styles from the installed `swagger-ui-dist`
 * package, served here, so it works on a host without internet access.
 */
const assetsDir = dirname(Bun.resolveSync("swagger-ui-dist/package.json", import.meta.dir));
const assets: Record<string, string> = {
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "swagger-ui.css": "text/css; charset=utf-8",
};
const assetsPath = "/docs/assets";

/** Options of the OpenAPI plugin's UI: Swagger UI from the assets below. */
export const docsUi = {
  provider: "swagger-ui" as const,
  swagger: { cdn: `${assetsPath}/swagger-ui-bundle.js`, theme: `${assetsPath}/swagger-ui.css`, autoDarkMode: true },
};

export const docsModule = () =>
  new Elysia({ name: "docs" }).get(
    `${assetsPath}/:file`,
    ({ params, set }) => {
      const type = Object.hasOwn(assets, params.file) ? assets[params.file] : undefined;
      if (!type) {
        set.status = 404;
        return { error: "not found" };
      }
      set.headers["content-type"] = type;
      set.headers["cache-control"] = "public, max-age=86400";
      return Bun.file(join(assetsDir, params.file));
    },
    { params: t.Object({ file: t.String() }), detail: { hide: true } },
  );
