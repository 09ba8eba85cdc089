// Validates the corpus of grammar_schema_corpus (argv[2]: its path) with ajv (draft 2020-12) and
// ajv-formats, installed by `npm ci --prefix tests/e2e`. Fails on any invalid text.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

const require = createRequire(new URL("../e2e/package.json", import.meta.url));
let Ajv2020, addFormats;
try {
  Ajv2020 = require("ajv/dist/2020").default;
  addFormats = require("ajv-formats").default;
} catch (e) {
  console.error("ajv is missing: run `npm ci --prefix tests/e2e` first (" + e.message + ")");
  process.exit(1);
}

const corpus = execFileSync(process.argv[2], { maxBuffer: 1 << 28 }).toString();
let checked = 0;
let failures = 0;
for (const line of corpus.split("\n")) {
  if (!line) continue;
  const { index, schema, values } = JSON.parse(line);
  const ajv = new Ajv2020({ strict: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  for (const text of values) {
    checked++;
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      failures++;
      console.error(`schema ${index}: not JSON: ${text}`);
      continue;
    }
    if (!validate(value)) {
      failures++;
      console.error(`schema ${index}: ${text}\n  ${JSON.stringify(validate.errors)}\n  ${JSON.stringify(schema)}`);
    }
  }
}
console.log(`${checked} texts checked against their schemas with ajv, ${failures} invalid`);
if (failures > 0 || checked < 2000) process.exit(1);
