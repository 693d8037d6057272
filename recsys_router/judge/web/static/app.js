// RouteJudge voting page: pick or draw a prompt, vote on two hidden answers, see the reveal.
"use strict";
const $ = (id) => document.getElementById(id);
let current = null;  // the open duel (token + answers)

function showError(msg) { const e = $("error"); e.textContent = msg; e.hidden = !msg; }

// voter key, when the server asks for one: read once from ?key=..., then kept for this tab
const KEY = new URLSearchParams(location.search).get("key") || sessionStorage.getItem("routejudge-key");
if (KEY) sessionStorage.setItem("routejudge-key", KEY);

async function api(path, body) {
  const headers = KEY ? {"x-api-key": KEY} : {};
  const opts = body === undefined ? {headers} : {method: "POST", body: JSON.stringify(body),
                                                 headers: {...headers, "content-type": "application/json"}};
  const resp = await fetch(path, opts);
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const d = data.detail;
    throw new Error(`${resp.status}: ${typeof d === "string" ? d : JSON.stringify(d)}`);
  }
  return data;
}

function fmtCost(c) { return c === null || c === undefined ? "n/a" : "$" + Number(c).toPrecision(3); }

async function loadPrompts() {
  const params = new URLSearchParams({limit: "200"});
  if ($("task").value) params.set("task", $("task").value);
  if ($("search").value) params.set("q", $("search").value);
  const rows = await api("/api/prompts?" + params);
  const sel = $("prompt");
  sel.innerHTML = "";
  for (const r of rows) {
    const o = document.createElement("option");
    o.value = r.query_id;
    o.textContent = `[${r.task ?? "-"}] ${r.preview.replace(/\s+/g, " ")}`;
    sel.appendChild(o);
  }
  if (rows.length) sel.selectedIndex = 0;
}

async function init() {
  try {
    const info = await api("/api/info");
    for (const t of info.tasks) {
      const o = document.createElement("option"); o.value = t; o.textContent = t; $("task").appendChild(o);
    }
    $("mode").textContent = `${info.n_prompts} prompts, routers: ${info.routers.join(", ")}` +
      (info.live ? " (live backends)" : " (recorded answers)");
    $("custom-row").hidden = !info.live;
    await loadPrompts();
  } catch (err) { showError(err.message); }
  const saved = sessionStorage.getItem("routejudge-duel");
  if (saved) { current = JSON.parse(saved); showDuel(); }  // an unfinished duel from before a reload
}

async function startDuel(random, custom) {
  showError("");
  const body = {};
  if (custom) {
    if (!$("custom-text").value.trim()) { showError("type a prompt first"); return; }
    body.text = $("custom-text").value;
    if ($("task").value) body.task = $("task").value;
  } else if (!random) {
    if (!$("prompt").value) { showError("select a prompt first (or draw a random one)"); return; }
    body.query_id = $("prompt").value;
  } else if ($("task").value) {
    body.task = $("task").value;
  }
  if ($("budget").value !== "") body.budget = Number($("budget").value);
  try {
    current = await api("/api/duel", body);
  } catch (err) { showError(err.message); return; }
  sessionStorage.setItem("routejudge-duel", JSON.stringify(current));  // survives a page reload
  showDuel();
}

function showDuel() {
  $("query").textContent = current.query;
  $("duel").hidden = false;
  $("query").scrollTop = $("query").scrollHeight;  // few-shot prompts end with the actual question
  $("task-badge").textContent = current.task ?? "";
  $("answer-A").textContent = current.answers.A;
  $("answer-B").textContent = current.answers.B;
  for (const b of document.querySelectorAll("button.vote")) b.disabled = false;
  $("reveal").hidden = true;
  $("duel").hidden = false;
}

async function vote(label) {
  if (!current) return;
  for (const b of document.querySelectorAll("button.vote")) b.disabled = true;
  let res;
  try {
    res = await api("/api/vote", {token: current.token, label: label});
  } catch (err) {
    showError(err.message);
    if (err.message.startsWith("409") || err.message.startsWith("404")) sessionStorage.removeItem("routejudge-duel");
    return;
  }
  current = null;
  sessionStorage.removeItem("routejudge-duel");
  $("llm-A").textContent = res.llm_a;
  $("llm-B").textContent = res.llm_b;
  $("cost-A").textContent = fmtCost(res.costs.A);
  $("cost-B").textContent = fmtCost(res.costs.B);
  $("verdict").textContent = {A: "A is better", B: "B is better", tie: "tie", both_bad: "both are bad"}[res.label];
  $("record-id").textContent = res.record_id;
  const tb = $("router-votes").querySelector("tbody");
  tb.innerHTML = "";
  for (const [router, llm] of Object.entries(res.router_choices)) {
    const s = res.attribution[router];
    const tr = document.createElement("tr");
    if (s === 1) tr.className = "chose-winner";
    for (const v of [router, llm, s === null ? "does not participate" : String(s)]) {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
    }
    tb.appendChild(tr);
  }
  $("reveal").hidden = false;
}

$("start-picked").addEventListener("click", () => startDuel(false));
$("start-random").addEventListener("click", () => startDuel(true));
$("start-custom").addEventListener("click", () => startDuel(false, true));
$("next").addEventListener("click", () => { $("reveal").hidden = true; $("duel").hidden = true; });
$("task").addEventListener("change", () => loadPrompts().catch((e) => showError(e.message)));
$("search").addEventListener("change", () => loadPrompts().catch((e) => showError(e.message)));
for (const b of document.querySelectorAll("button.vote")) b.addEventListener("click", () => vote(b.dataset.label));
init();
