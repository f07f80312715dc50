// One function: its state and instances, live charts, exceptions, lifecycle, config, state.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, field, fnPath, get, post, request, topicParts, topicPath } from "../api.js";
import { Badge, Chart, ErrorNote, Json, fmt, usePoll, when } from "../common.js";
import { html } from "../html.js";
import { StateBrowser } from "./state.js";

const EVERY = 2000;
const KEEP = 90; // points per chart: three minutes at one every two seconds

async function summary(fqfn) {
  const found = await get(`/admin/v3/functions?${new URLSearchParams({ search: fqfn, limit: 50 })}`);
  const fn = found.functions.find((f) => f.fqfn === fqfn);
  if (!fn) throw new ApiError(404, "function_not_found", `function ${fqfn} does not exist`);
  return fn;
}

// The config of a version, whether the worker answers FunctionInfo ({config, ...}) or the config.
function configOf(info) {
  return info && info.config && typeof info.config === "object" ? info.config : info;
}

async function inputLag(fqfn, config) {
  const inputs = field(config, "inputs") || [];
  const sub = field(config, "subscription_name") || fqfn;
  let lag = 0;
  for (const input of inputs) {
    const [t, ns, name] = topicParts(input);
    const stats = await get(`${topicPath(t, ns, name)}/stats`).catch(() => null);
    const found = stats && stats.subscriptions && stats.subscriptions[sub];
    if (found) lag += found.msgBacklog || 0;
  }
  return lag;
}

function useSeries(fqfn, config) {
  const [series, setSeries] = useState({ throughput: [], latency: [], lag: [], exceptions: [], processed: 0 });
  const previous = useRef(null);
  useEffect(() => {
    let alive = true;
    previous.current = null;
    setSeries({ throughput: [], latency: [], lag: [], exceptions: [], processed: 0 });
    const sample = async () => {
      try {
        const [stats, lag] = await Promise.all([
          get(`${fnPath(fqfn)}/stats`),
          config ? inputLag(fqfn, config) : Promise.resolve(0),
        ]);
        if (!alive) return;
        const now = Date.now();
        const processed = stats.processedSuccessfullyTotal || 0;
        const failed = (stats.userExceptionsTotal || 0) + (stats.systemExceptionsTotal || 0);
        const before = previous.current;
        previous.current = { now, processed, failed };
        setSeries((s) => {
          const dt = before ? (now - before.now) / 1000 : 0;
          const add = (list, v) => [...list, { t: now, v }].slice(-KEEP);
          return {
            processed,
            throughput: dt ? add(s.throughput, Math.max(0, processed - before.processed) / dt) : s.throughput,
            exceptions: dt ? add(s.exceptions, Math.max(0, failed - before.failed)) : s.exceptions,
            latency: add(s.latency, stats.avgProcessLatency || 0),
            lag: add(s.lag, lag),
            failed,
          };
        });
      } catch {
        /* the next sample tries again; the page shows the status error */
      }
    };
    sample();
    const timer = setInterval(sample, EVERY);
    return () => {
      alive = false;
      clearInterval(timer);
    };
  }, [fqfn, config]);
  return series;
}

function Actions({ fqfn, onDone, instance }) {
  const [busy, setBusy] = useState("");
  const [error, setError] = useState(null);
  const [done, setDone] = useState("");
  const base = instance === undefined ? fnPath(fqfn) : `${fnPath(fqfn)}/${instance}`;
  const verbs = ["start", "stop", "drain", "suspend", "restart"];
  const act = async (verb) => {
    setBusy(verb);
    setError(null);
    setDone("");
    try {
      await post(`${base}/${verb}`);
      setDone(`${verb}: done`);
      onDone && onDone();
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy("");
    }
  };
  const label = instance === undefined ? "" : ` instance ${instance}`;
  return html`<div class="actions" role="group" aria-label="Lifecycle${label}">
    ${verbs.map(
      (verb) => html`<button onClick=${() => act(verb)} disabled=${!!busy} data-action=${verb}
        aria-label="${verb}${label}" class=${verb === "start" ? "primary-outline" : ""}>
        ${busy === verb ? "…" : verb[0].toUpperCase() + verb.slice(1)}</button>`,
    )}
    ${done && html`<span class="muted small" role="status">${done}</span>`}
    <${ErrorNote} error=${error} />
  </div>`;
}

function Exceptions({ status }) {
  const items = [];
  for (const inst of status.instances || []) {
    const s = inst.status;
    for (const e of s.latestUserExceptions || []) items.push({ kind: "user", id: inst.instanceId, ...e });
    for (const e of s.latestSystemExceptions || []) items.push({ kind: "system", id: inst.instanceId, ...e });
  }
  items.sort((a, b) => b.timestampMs - a.timestampMs);
  const deaths = (status.instances || []).filter((i) => i.status.deathException);
  return html`<section class="card" aria-labelledby="exc-title">
    <h2 id="exc-title">Exceptions</h2>
    ${deaths.map((i) => {
      const d = i.status.deathException;
      return html`<details class="death" open>
        <summary><span class="badge tone-bad">death</span> instance ${i.instanceId}: <code>${d.type}</code> ${d.message}
          ${d.origin && html`<span class="muted"> (${d.origin})</span>`}</summary>
        <pre class="trace">${d.traceback || "(no traceback)"}</pre>
      </details>`;
    })}
    ${items.length === 0 && deaths.length === 0 && html`<p class="muted">None recorded.</p>`}
    ${items.slice(0, 20).map(
      (e) => html`<details>
        <summary><span class="badge ${e.kind === "user" ? "tone-warn" : "tone-bad"}">${e.kind}</span>
          ${" "}instance ${e.id} · ${when(e.timestampMs)} · <code>${e.exceptionString}</code>
          ${e.messageId && html`<span class="muted"> · message ${e.messageId}</span>`}</summary>
        <pre class="trace">${e.traceback || "(no traceback)"}</pre>
      </details>`,
    )}
  </section>`;
}

function Lifecycle({ fqfn }) {
  const [rows, error] = usePoll(() => get(`${fnPath(fqfn)}/transitions`), [fqfn], 5000);
  return html`<section class="card" aria-labelledby="life-title">
    <h2 id="life-title">Lifecycle record</h2>
    <${ErrorNote} error=${error} />
    ${rows && rows.length === 0 && html`<p class="muted">No transition yet: the function never ran.</p>`}
    ${rows && rows.length > 0 && html`<div class="scroll"><table class="list compact" data-testid="transitions">
      <thead><tr><th scope="col">Time</th><th scope="col">Of</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Cause</th></tr></thead>
      <tbody>${[...rows].reverse().map(
        (r) => html`<tr><td class="nowrap">${when(r.at)}</td><td>${r.instance === null ? "function" : `instance ${r.instance}`}</td>
          <td>${r.fromState || "–"}</td><td><${Badge} state=${r.toState} /></td><td>${r.cause}</td></tr>`,
      )}</tbody></table></div>`}
  </section>`;
}

function Versions({ fqfn, current }) {
  const [chosen, setChosen] = useState(current);
  useEffect(() => setChosen(current), [current]);
  const [info, error] = usePoll(() => get(`${fnPath(fqfn)}?version=${chosen}`), [fqfn, chosen]);
  const versions = Array.from({ length: current }, (_, i) => current - i);
  return html`<section class="card" aria-labelledby="cfg-title">
    <div class="card-head">
      <h2 id="cfg-title">Config</h2>
      <label>Version
        <select value=${chosen} onChange=${(e) => setChosen(Number(e.target.value))}>
          ${versions.map((v) => html`<option value=${v}>v${v}${v === current ? " (current)" : ""}</option>`)}
        </select>
      </label>
    </div>
    <${ErrorNote} error=${error} />
    ${info && info.createdAt && html`<p class="muted small">Created ${when(info.createdAt)} by ${info.createdBy}
      ${info.packageDigest && html` · package <code>${info.packageDigest.slice(0, 19)}…</code>`}</p>`}
    ${info && html`<${Json} value=${configOf(info)} />`}
  </section>`;
}

export function FunctionPage({ fqfn }) {
  const [fn, fnError, reloadFn] = usePoll(() => summary(fqfn), [fqfn], 3000);
  const [status, statusError, reloadStatus] = usePoll(() => get(`${fnPath(fqfn)}/status`), [fqfn], EVERY);
  const [info] = usePoll(() => get(fnPath(fqfn)), [fqfn, fn && fn.version]);
  const config = configOf(info);
  const series = useSeries(fqfn, config);
  const reload = () => {
    reloadFn();
    reloadStatus();
  };
  const [tenant, namespace, name] = fqfn.split("/");
  return html`<section aria-labelledby="fn-name">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/functions">Functions</a> / ${tenant}/${namespace}</nav>
    <div class="page-head">
      <h1 id="fn-name">${name}</h1>
      ${fn && html`<${Badge} state=${fn.state} />`}
      ${fn && html`<span class="muted">v${fn.version} · wanted ${fn.desired}</span>`}
      <div class="spacer"></div>
      <a class="button" href=${`#/update/${fqfn}`}>Update…</a>
    </div>
    <${ErrorNote} error=${fnError || statusError} />
    <${Actions} fqfn=${fqfn} onDone=${reload} />
    <div class="charts" aria-label="Live metrics">
      <${Chart} title="Throughput" unit="msg/s" testid="chart-throughput" points=${series.throughput}
        caption=${html`<span data-testid="processed-total">${fmt(series.processed)}</span> processed`} />
      <${Chart} title="Process latency" unit="ms" testid="chart-latency" points=${series.latency} caption="average, per message" />
      <${Chart} title="Input lag" unit="msgs" testid="chart-lag" points=${series.lag} caption="backlog of its subscription" />
      <${Chart} title="Exceptions" unit="per sample" testid="chart-exceptions" points=${series.exceptions}
        caption=${`${fmt(series.failed || 0)} in all`} />
    </div>
    ${status && html`<section class="card" aria-labelledby="inst-title">
      <h2 id="inst-title">Instances <span class="muted">${status.numRunning} of ${status.numInstances} running · ${status.numRestarts} restarts</span></h2>
      <div class="scroll"><table class="list compact" data-testid="instances">
        <thead><tr><th scope="col">#</th><th scope="col">State</th><th scope="col">Received</th><th scope="col">Processed</th>
          <th scope="col">User exc.</th><th scope="col">System exc.</th><th scope="col">Dead-lettered</th><th scope="col">Avg latency</th>
          <th scope="col">Last invocation</th><th scope="col">Actions</th></tr></thead>
        <tbody>${status.instances.map((i) => html`<tr data-instance=${i.instanceId}>
          <td>${i.instanceId}</td><td><${Badge} state=${i.status.state} />${i.status.error && html` <span class="muted small">${i.status.error}</span>`}</td>
          <td>${fmt(i.status.numReceived)}</td><td>${fmt(i.status.numSuccessfullyProcessed)}</td>
          <td>${fmt(i.status.numUserExceptions)}</td><td>${fmt(i.status.numSystemExceptions)}</td>
          <td>${fmt(i.status.numDeadLettered)}</td><td>${fmt(i.status.averageLatency)} ms</td>
          <td class="nowrap">${when(i.status.lastInvocationTime)}</td>
          <td><${Actions} fqfn=${fqfn} instance=${i.instanceId} onDone=${reload} /></td></tr>`)}
        </tbody></table></div>
    </section>`}
    ${status && html`<${Exceptions} status=${status} />`}
    <div class="two">
      <${Lifecycle} fqfn=${fqfn} />
      <${StateBrowser} fqfn=${fqfn} />
    </div>
    ${fn && html`<${Versions} fqfn=${fqfn} current=${fn.version} />`}
    <${DeleteButton} fqfn=${fqfn} />
  </section>`;
}

function DeleteButton({ fqfn }) {
  const [error, setError] = useState(null);
  const remove = async () => {
    if (!confirm(`Delete ${fqfn}? Its state, checkpoints and subscription go too.`)) return;
    try {
      await request("DELETE", fnPath(fqfn));
      location.hash = "#/functions";
    } catch (exc) {
      setError(exc);
    }
  };
  return html`<div class="danger-zone"><button class="danger" onClick=${remove}>Delete function…</button>
    <${ErrorNote} error=${error} /></div>`;
}
