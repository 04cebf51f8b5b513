// Writes tests/data/lz_string_pairs.json: texts and links made with the reference lz-string
// (JavaScript, https://github.com/pieroxy/lz-string), the fixture of tests/test_ptn_ninja.py.
//
//   npm install lz-string@1.5.0 && node scripts/lz_string_pairs.js > tests/data/lz_string_pairs.json
//
// Links follow PTN Ninja's `url` getter (gruppler/PTN-Ninja): origin + compressed PTN, then
// "&key=" + urlEncode(value) per parameter, name compressed, ply "INDEX" or "INDEX!".
const lz = require("lz-string");
const fs = require("fs");

const urlEncode = (s) =>
  encodeURIComponent(s).replace(/([()])/g, (c) => "%" + c.charCodeAt(0).toString(16));

const texts = [
  "",
  "a",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "abababababababababababababababababababababababababababababababababab",
  "1. a1 f6\n2. Cc3 d4\n",
  "Player ü, 日本語, Ω and an emoji 😀 (outside the BMP)",
  "\u0100\u01ff\u2603 \ud83c\udfb2\ud83c\udfb2 x",
  fs.readFileSync("tests/data/games/gotak/gotak_5x5_01.ptn", "utf8"),
  fs.readFileSync("tests/data/games/gotak/gotak_6x6_01.ptn", "utf8"),
];
const games = [
  {
    ptn: '[Size "5"]\n[Komi "0"]\n[Player1 "alice"]\n[Player2 "bob"]\n[Result "R-0"]\n\n' +
      "1. a1 e5\n2. e4 e3\n3. d4 d3\n4. c4 c3\n5. b4 b3\n6. a4 R-0\n",
    name: "alice vs bob (road)",
    ply: 11,
  },
  { ptn: '[Size "3"]\n\n1. a1 c3\n', name: "", ply: 0 },
];
const links = games.map((g) => {
  const params = [];
  if (g.name) params.push("name=" + urlEncode(lz.compressToEncodedURIComponent(g.name)));
  params.push("ply=" + (g.ply > 0 ? g.ply - 1 + "!" : "0"));
  const url = "https://ptn.ninja/" + lz.compressToEncodedURIComponent(g.ptn) + "&" + params.join("&");
  return { ...g, url };
});
const pairs = texts.map((text) => ({ text, compressed: lz.compressToEncodedURIComponent(text) }));
const encoded = ["a+b$c-d", "(x) y!*~'._", "é&=/?#%"].map((text) => ({ text, encoded: urlEncode(text) }));
process.stdout.write(JSON.stringify({ lz_string: "1.5.0", pairs, links, url_encode: encoded }, null, 1) + "\n");
