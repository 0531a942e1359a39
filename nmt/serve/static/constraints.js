// What the page sends as `constraints`: the phrases typed in its box, comma separated, which
// every sentence of the request must contain. Plain functions, so a test can run them in Node.
"use strict";

function parsePhrases(typed) {
  return typed.split(",").map((p) => p.trim()).filter((p) => p);
}

// The request's `constraints` for these texts (one list per text), or undefined for none, so a
// request without phrases is the same request as before the box existed.
function constraintsFor(texts, typed) {
  const phrases = parsePhrases(typed);
  return phrases.length ? texts.map(() => phrases) : undefined;
}

if (typeof module === "object") module.exports = { parsePhrases, constraintsFor };
