// The unit tests of clients/ts (test/*.test.ts): `npm test`, run by make test. They run on
// the TypeScript sources (no build needed) in Node; the page's DOM code is tested in a real
// browser by tests/test_web_page.py.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
  },
});
