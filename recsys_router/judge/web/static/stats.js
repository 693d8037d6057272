// RouteJudge stats page: live leaderboard and head-to-head matrix, refreshed every 5 s.
"use strict";
const $ = (id) => document.getElementById(id);
const f3 = (v) => (v === null || v === undefined ? "" : Number(v).toFixed(3));
const f0 = (v) => (v === null || v === undefined ? "" : Number(v).toFixed(0));

function cell(tr, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }

async function refresh() {
  let s;
  try {
    const key = new URLSearchParams(location.search).get("key") || sessionStorage.getItem("routejudge-key");
    const resp = await fetch("/api/stats", {headers: key ? {"x-api-key": key} : {}});
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    s = await resp.json();
  } catch (err) { $("error").textContent = err.message; $("error").hidden = false; return; }
  $("error").hidden = true;
  $("n-records").textContent = `${s.n_records} records`;
  const tb = $("leaderboard").querySelector("tbody");
  tb.innerHTML = "";
  s.leaderboard.forEach((r, k) => {
    const tr = document.createElement("tr");
    cell(tr, String(k + 1)); cell(tr, r.router); cell(tr, f0(r.elo_median), "num");
    cell(tr, `${f0(r.elo_lower)} to ${f0(r.elo_upper)}`, "num"); cell(tr, f3(r.pref_score), "num");
    cell(tr, f3(r.win_rate), "num"); cell(tr, f3(r.participation), "num");
    cell(tr, String(r.n_participating), "num");
    cell(tr, r.mean_cost === null ? "" : "$" + Number(r.mean_cost).toPrecision(3), "num");
    tb.appendChild(tr);
  });
  const head = $("h2h").querySelector("thead"), body = $("h2h").querySelector("tbody");
  head.innerHTML = ""; body.innerHTML = "";
  const hr = document.createElement("tr");
  cell(hr, "");
  for (const r of s.h2h.routers) cell(hr, r);
  head.appendChild(hr);
  s.h2h.matrix.forEach((row, i) => {
    const tr = document.createElement("tr");
    cell(tr, s.h2h.routers[i]);
    for (const v of row) cell(tr, v === null ? "-" : f3(v), "num");
    body.appendChild(tr);
  });
}

refresh();
setInterval(refresh, 5000);
