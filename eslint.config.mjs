// ESLint for the operator page's modules (src/session_journal/web/page/*.js): the recommended
// rules, ES2022 modules in a browser; and for their unit tests (tests/js, Node's test runner). `make lint-js` runs it; `make lint` and .ci/run include it.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["src/session_journal/web/page/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser },
    },
  },
  {
    files: ["tests/js/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.node },
    },
  },
];
