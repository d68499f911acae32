// Bundles the page (src/web/app.ts and what it imports) into server/web/app.js, which is
// committed so that the server runs with Python alone; `make web` rebuilds it, and
// tests/test_web_page.py fails when the committed bundle is not what this builds.
// Usage: node build-web.mjs [OUTFILE]
import { build } from "esbuild";

const outfile = process.argv[2] ?? "../../server/web/app.js";
await build({
  entryPoints: ["src/web/app.ts"],
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "eof",
  charset: "utf8",
  banner: {
    js:
      "// The Copas page, built by clients/ts/build-web.mjs from clients/ts/src/web/ (make web).\n" +
      "// Includes @bufbuild/protobuf, @connectrpc/connect and @connectrpc/connect-web (Apache-2.0).",
  },
  outfile,
  logLevel: "warning",
});
