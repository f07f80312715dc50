// The worker: version, Spark, uptime, readiness, its functions per state, and its cluster.
import { get } from "../api.js";
import { Badge, ErrorNote, duration, usePoll, when } from "../common.js";
import { html } from "../html.js";

async function readiness() {
  try {
    return await get("/ready");
  } catch (exc) {
    if (exc.status === 401) throw exc;
    return { status: "not ready", reason: exc.reason, message: exc.message };
  }
}

// The cluster of the worker's store: every live worker, the leader, and what runs where
// (Pulsar's /admin/v2/worker routes; a worker without the assignments route shows none).
async function cluster() {
  const [workers, leader, assignments] = await Promise.all([
    get("/admin/v2/worker/cluster"),
    get("/admin/v2/worker/cluster/leader").catch((exc) => {
      if (exc.status === 401) throw exc;
      return null; // 503 no_leader: none leads this moment
    }),
    get("/admin/v2/worker/assignments").catch((exc) => {
      if (exc.status === 401) throw exc;
      return null;
    }),
  ]);
  return { workers, leader, assignments };
}

function ClusterCard({ self }) {
  const [found, error] = usePoll(cluster, [], 3000);
  if (error) return html`<section class="card"><h2>Cluster</h2><${ErrorNote} error=${error} /></section>`;
  if (!found) return null;
  const { workers, leader, assignments } = found;
  const runs = (id) => (assignments && assignments[id]) || [];
  return html`<section class="card" aria-labelledby="cluster-title"><h2 id="cluster-title">Cluster</h2>
    <p class="muted">${workers.length} live worker${workers.length === 1 ? "" : "s"}; leader:
      ${leader ? html` <code>${leader.workerId}</code>` : " none this moment (one takes over within seconds)"}</p>
    <table class="list" data-testid="cluster"><thead><tr><th>Worker</th><th>Address</th><th>Role</th>
      ${assignments && html`<th>Instances</th>`}</tr></thead>
      <tbody>${workers.map((w) => html`<tr data-worker=${w.workerId}>
        <td><code>${w.workerId}</code>${w.workerId === self ? html` <span class="muted">(this one)</span>` : ""}</td>
        <td>${w.workerHostname}:${w.port}</td>
        <td>${leader && leader.workerId === w.workerId ? html`<span class="badge tone-ok">leader</span>` : "member"}</td>
        ${assignments && html`<td title=${runs(w.workerId).join("\n")}>${runs(w.workerId).length}</td>`}
      </tr>`)}</tbody></table></section>`;
}

export function WorkerPage() {
  const [info, error] = usePoll(() => get("/admin/v3/worker"), [], 2000);
  const [ready] = usePoll(readiness, [], 5000);
  const states = info ? Object.entries(info.functionsByState).sort() : [];
  const total = states.reduce((a, [, n]) => a + n, 0);
  return html`<section aria-labelledby="worker-title">
    <div class="page-head"><h1 id="worker-title">Worker ${info && html`<code>${info.workerId}</code>`}</h1>
      ${ready && html`<span class=${`badge ${ready.status === "ready" ? "tone-ok" : "tone-warn"}`}>${ready.status}</span>`}</div>
    <${ErrorNote} error=${error} />
    ${ready && ready.message && html`<p class="muted">${ready.reason}: ${ready.message}</p>`}
    ${info && html`<div class="two">
      <section class="card" aria-labelledby="about-title"><h2 id="about-title">About</h2>
        <dl class="facts" data-testid="worker-facts">
          <dt>sparkfn</dt><dd>${info.version}</dd>
          <dt>Spark</dt><dd>${info.sparkVersion || "not started yet"}</dd>
          <dt>Spark master</dt><dd><code>${info.sparkMaster}</code></dd>
          <dt>Spark UI</dt><dd>${info.sparkUiUrl
            ? html`<a href=${info.sparkUiUrl} target="_blank" rel="noopener">${info.sparkUiUrl}</a>`
            : html`<span class="muted">off (spark.ui.enabled is false, or Spark has not started)</span>`}</dd>
          <dt>Up</dt><dd data-testid="uptime">${duration(info.uptimeSeconds)} <span class="muted">since ${when(info.startedAt)}</span></dd>
          <dt>Store</dt><dd>${info.store}</dd>
          <dt>Auth</dt><dd>${info.authEnabled ? "on (bearer tokens)" : "off"}</dd>
        </dl></section>
      <section class="card" aria-labelledby="states-title"><h2 id="states-title">Functions per state</h2>
        ${total === 0 && html`<p class="muted">No function registered.</p>`}
        <ul class="bars" data-testid="states">${states.map(([state, n]) => html`<li>
          <a href=${`#/functions?state=${state}`}><${Badge} state=${state} /></a>
          <span class="bar"><span style=${`width:${(100 * n) / Math.max(1, total)}%`} class="tone-${state}"></span></span>
          <strong>${n}</strong></li>`)}</ul>
      </section></div>`}
    ${info && html`<${ClusterCard} self=${info.workerId} />`}
  </section>`;
}
