// tools/train/hf_tokenize.js — the independent tokenizer reference: encodes
// strings with Hugging Face `tokenizers` (npm package, Node bindings of the
// Rust library) and writes {text, ids, decoded} JSON lines.
// Usage (npm install tokenizers in a scratch folder, then):
//   NODE_PATH=SCRATCH/node_modules node hf_tokenize.js TOKENIZER_JSON IN_JSON OUT_JSONL
// IN_JSON is a JSON array of strings. Encoded without special tokens added
// (the tokenizer has no post-processor anyway) and with special-token parsing.
const { Tokenizer } = require("tokenizers");
const fs = require("fs");
const [tokPath, inPath, outPath] = process.argv.slice(2);
const t = Tokenizer.fromFile(tokPath);
const texts = JSON.parse(fs.readFileSync(inPath, "utf8"));
(async () => {
  const lines = [];
  for (const text of texts) {
    const e = await t.encode(text, null, { addSpecialTokens: false });
    const ids = Array.from(e.getIds());
    const decoded = await t.decode(ids, false);
    lines.push(JSON.stringify({ text, ids, decoded }));
  }
  fs.writeFileSync(outPath + ".tmp", lines.join("\n") + "\n");
  fs.renameSync(outPath + ".tmp", outPath);
  console.log(`${texts.length} strings -> ${outPath}`);
})();
