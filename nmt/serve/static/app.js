// The page of `nmt serve`: plain DOM code, no framework, nothing loaded from elsewhere.
"use strict";

const $ = (id) => document.getElementById(id);
let model = null;          // GET /v1/model
let results = [];          // [{source, translation, constraints}] of the last request
let selected = -1;

function option(select, value, label, chosen) {
  const o = document.createElement("option");
  o.value = String(value);
  o.textContent = label;
  o.selected = chosen;
  select.appendChild(o);
}

function fillNbest() {
  const beam = Number($("beam").value), keep = Math.min(Number($("nbest").value) || 1, beam);
  $("nbest").replaceChildren();
  for (let k = 1; k <= beam; k++) option($("nbest"), k, String(k), k === keep);
}

async function loadModel() {
  const r = await fetch("/v1/model");
  model = await r.json();
  const bleu = model.valid_bleu == null ? "" : `, valid BLEU ${model.valid_bleu.toFixed(1)}`;
  $("model-info").textContent = `${model.arch}, ${model.parameters.toLocaleString("en")} ` +
    `parameters, step ${model.step}${bleu}`;
  if (model.example) $("source").placeholder = model.example;  // from the run's own data
  for (let b = 1; b <= model.limits.max_beam; b++)
    option($("beam"), b, b === 1 ? "1 (greedy)" : String(b), b === model.default_beam);
  fillNbest();
  // A multilingual model needs a target language with every request; others have just theirs.
  for (const lang of model.target_languages) option($("tgt-lang"), lang, lang, false);
  $("tgt-lang-label").hidden = !model.multilingual;
  // A pivot is a language the model both reads and writes: source -> pivot -> target.
  option($("pivot"), "", "direct", true);
  for (const lang of model.target_languages)
    if (model.source_languages.includes(lang)) option($("pivot"), lang, lang, false);
  $("pivot-label").hidden = !model.multilingual;
  for (let l = 0; l < model.attention_layers; l++)
    option($("layer"), l, String(l), l === model.attention_layers - 1);
  option($("head"), "", "mean", true);
  for (let h = 0; h < model.attention_heads; h++) option($("head"), h, String(h), false);
  // RNN alignments have one layer and one head: nothing to pick.
  $("view-controls").hidden = model.attention_layers * model.attention_heads === 1;
}

function view() {
  const head = $("head").value;
  return { attention_layer: Number($("layer").value), attention_head: head === "" ? null : Number(head) };
}

async function post(texts, extra) {
  const body = { text: texts, beam: Number($("beam").value), nbest: Number($("nbest").value),
                 alignment: true, ...view(), ...extra };
  if (model.multilingual) body.tgt_lang = $("tgt-lang").value;
  // Through a pivot the last pass reads the pivot text: no attention over the input to show.
  if (model.multilingual && $("pivot").value)
    Object.assign(body, { pivot: $("pivot").value, alignment: false });
  const r = await fetch("/v1/translate", { method: "POST", body: JSON.stringify(body),
                                           headers: { "Content-Type": "application/json" } });
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

async function translate() {
  const texts = $("source").value.split("\n").map((s) => s.trim()).filter((s) => s);
  if (!texts.length) { $("status").textContent = "type a sentence first"; return; }
  $("translate").disabled = true;
  $("status").className = "muted";
  $("status").textContent = "translating…";
  try {
    const constraints = constraintsFor(texts, $("constraints").value);  // constraints.js
    const data = await post(texts, constraints ? { constraints } : {});
    results = texts.map((s, i) => ({
      source: s, translation: data.translations[i], constraints: constraints && constraints[i],
    }));
    $("status").textContent = `${texts.length} sentence(s) in ${Math.round(data.time_ms)} ms`;
    renderList();
    select(0);
  } catch (e) {
    $("status").className = "error";
    $("status").textContent = e.message;
  } finally {
    $("translate").disabled = false;
  }
}

function renderList() {
  const list = $("translations");
  list.replaceChildren();
  results.forEach((r, i) => {
    const li = document.createElement("li");
    li.tabIndex = 0;
    const src = document.createElement("span"), text = document.createElement("span");
    src.className = "source"; src.textContent = r.source;
    text.className = "text"; text.textContent = r.translation.text;
    li.append(src, text);
    if (r.translation.nbest.length > 1) {
      const alts = document.createElement("ol");
      alts.className = "alt";
      for (const h of r.translation.nbest) {
        const a = document.createElement("li");
        a.textContent = `${h.text}  (${h.score.toFixed(3)})`;
        alts.appendChild(a);
      }
      li.appendChild(alts);
    }
    for (const w of r.translation.warnings) {
      const warn = document.createElement("span");
      warn.className = "warning"; warn.textContent = `⚠ ${w}`;
      li.appendChild(warn);
    }
    li.addEventListener("click", () => select(i));
    li.addEventListener("keydown", (e) => { if (e.key === "Enter") select(i); });
    list.appendChild(li);
  });
}

function select(i) {
  selected = i;
  [...$("translations").children].forEach((li, k) => li.classList.toggle("selected", k === i));
  renderHeatmap(results[i].translation);
}

// A piece without sentencepiece's word-boundary marker ("\u2581the" -> "the"), as in the PNG maps.
const display = (piece) => piece.replaceAll("\u2581", "");

function shade(w) {  // white -> deep blue
  const t = Math.max(0, Math.min(1, w));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(255, 16)}, ${mix(255, 60)}, ${mix(255, 160)})`;
}

function renderHeatmap(t) {
  const table = $("heatmap");
  table.replaceChildren();
  $("attention").hidden = !t.alignment;
  if (!t.alignment) return;
  const head = document.createElement("thead"), row = document.createElement("tr");
  row.appendChild(document.createElement("th"));
  for (const s of t.src_pieces) {
    const th = document.createElement("th");
    th.scope = "col"; th.textContent = display(s); row.appendChild(th);
  }
  head.appendChild(row);
  const body = document.createElement("tbody");
  t.alignment.forEach((weights, ti) => {
    const tr = document.createElement("tr"), th = document.createElement("th");
    th.scope = "row"; th.textContent = display(t.tgt_pieces[ti]); tr.appendChild(th);
    weights.forEach((w, si) => {
      const td = document.createElement("td");
      const label = `${display(t.tgt_pieces[ti])} ← ${display(t.src_pieces[si])}: ${w.toFixed(3)}`;
      td.style.background = shade(w);
      td.title = label;
      td.dataset.weight = String(w);
      const show = () => { $("cell-info").textContent = label; };
      td.addEventListener("mouseenter", show);
      td.addEventListener("click", show);
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
  table.append(head, body);
}

async function changeView() {  // same sentence, another layer/head: ask again for it alone
  if (selected < 0) return;
  try {
    const r = results[selected];
    const data = await post([r.source], r.constraints ? { constraints: [r.constraints] } : {});
    results[selected].translation = data.translations[0];
    renderHeatmap(data.translations[0]);
  } catch (e) {
    $("cell-info").textContent = e.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("translate").addEventListener("click", translate);
  $("beam").addEventListener("change", fillNbest);
  $("layer").addEventListener("change", changeView);
  $("head").addEventListener("change", changeView);
  $("source").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate();
  });
  $("constraints").addEventListener("keydown", (e) => { if (e.key === "Enter") translate(); });
  loadModel().catch((e) => { $("model-info").textContent = `cannot load the model: ${e.message}`; });
});
