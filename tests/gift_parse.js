// Parse GIFT from stdin with the npm package gift-pegjs; print its questions as JSON (or the error, exit 1).
const { parse } = require("gift-pegjs");
let text = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { text += d; });
process.stdin.on("end", () => {
  try {
    process.stdout.write(JSON.stringify(parse(text)));
  } catch (e) {
    const where = e.location ? ` at line ${e.location.start.line}, column ${e.location.start.column}` : "";
    process.stderr.write(`${e.name}: ${e.message}${where}\n`);
    process.exit(1);
  }
});
