// Topics by tenant and namespace; a topic's partitions, end offsets, subscriptions and lag,
// and a peek at its latest messages.
import { useState } from "preact/hooks";
import { get, topicPath } from "../api.js";
import { ErrorNote, fmt, usePoll, when } from "../common.js";
import { html } from "../html.js";
import { hex } from "./state.js";

async function everyTopic() {
  const tenants = await get("/admin/v2/tenants");
  const found = [];
  for (const tenant of tenants) {
    for (const ns of await get(`/admin/v2/namespaces/${encodeURIComponent(tenant)}`)) {
      const [t, n] = ns.split("/");
      const topics = await get(`/admin/v2/persistent/${encodeURIComponent(t)}/${encodeURIComponent(n)}`);
      for (const topic of topics) found.push(topic.replace(/^persistent:\/\//, ""));
    }
  }
  return found;
}

const SHOWN = 100;

function TopicRow({ topic }) {
  const [tenant, ns, name] = topic.split("/");
  const [stats] = usePoll(() => get(`${topicPath(tenant, ns, name)}/partitioned-stats`), [topic]);
  const subs = stats ? Object.entries(stats.subscriptions) : [];
  const lag = subs.reduce((sum, [, s]) => sum + (s.msgBacklog || 0), 0);
  return html`<tr data-topic=${topic}>
    <td><a href=${`#/topics/${topic}`}>${name}</a></td>
    <td>${stats ? stats.schemaType : ""}</td>
    <td>${stats ? stats.metadata.partitions : ""}</td>
    <td>${stats ? fmt(stats.msgInCounter) : ""}</td>
    <td>${stats ? fmt(stats.messages) : ""}</td>
    <td>${stats ? subs.length : ""}</td>
    <td>${stats ? fmt(lag) : ""}</td>
  </tr>`;
}

export function TopicList() {
  const [topics, error] = usePoll(everyTopic, [], 10000);
  const [search, setSearch] = useState("");
  const matching = (topics || []).filter((t) => t.toLowerCase().includes(search.toLowerCase()));
  const shown = matching.slice(0, SHOWN);
  let lastNs = null;
  return html`<section aria-labelledby="topics-title">
    <div class="page-head"><h1 id="topics-title">Topics</h1></div>
    <div class="toolbar"><label class="search"><span class="sr-only">Search topics</span>
      <input type="search" data-search placeholder="Search topics  ( / )" value=${search}
        onInput=${(e) => setSearch(e.target.value)} /></label></div>
    <${ErrorNote} error=${error} />
    ${topics && matching.length === 0 && html`<p class="muted">No topic.</p>`}
    ${matching.length > SHOWN && html`<p class="muted">The first ${SHOWN} of ${matching.length}: search to narrow them.</p>`}
    ${shown.length > 0 && html`<table class="list"><thead><tr><th scope="col">Topic</th><th scope="col">Schema</th>
      <th scope="col">Partitions</th><th scope="col">Appended</th><th scope="col">Retained</th>
      <th scope="col">Subscriptions</th><th scope="col">Lag</th></tr></thead><tbody>
      ${shown.map((t) => {
        const [tenant, ns] = t.split("/");
        const head = `${tenant}/${ns}` !== lastNs;
        lastNs = `${tenant}/${ns}`;
        return html`${head && html`<tr class="group"><th colspan="7" scope="rowgroup">${lastNs}</th></tr>`}
          <${TopicRow} key=${t} topic=${t} />`;
      })}</tbody></table>`}
  </section>`;
}

function Payload({ message, schemaType }) {
  const [mode, setMode] = useState("auto");
  let shown;
  let kind;
  const value = message.value;
  if (mode === "hex" || (mode === "auto" && value === null && message.valueBase64)) {
    kind = "binary";
    shown = message.valueBase64 ? hex(message.valueBase64) : "";
  } else if (value !== null && typeof value === "object") {
    kind = "json";
    shown = JSON.stringify(value, null, 2);
  } else {
    const text = value === null ? "" : String(value);
    try {
      const parsed = JSON.parse(text);
      if (parsed !== null && typeof parsed === "object") {
        kind = "json";
        shown = JSON.stringify(parsed, null, 2);
      }
    } catch {
      /* plain text */
    }
    if (!kind) {
      kind = "text";
      shown = text;
    }
  }
  return html`<div class="payload" data-kind=${kind}>
    <div class="payload-head"><span class="badge tone-off">${kind}</span>
      <button class="link small" onClick=${() => setMode(mode === "hex" ? "auto" : "hex")}>${mode === "hex" ? "decoded" : "hex"}</button></div>
    <pre>${shown}</pre></div>`;
}

async function latest(base, partitions, count) {
  const found = [];
  for (let p = 0; p < partitions; p++) {
    for (let n = 1; n <= count; n++) {
      try {
        const q = new URLSearchParams({ initialPosition: "latest", messagePosition: n, partition: p });
        found.push(await get(`${base}/examinemessage?${q}`));
      } catch (exc) {
        if (exc.status === 404) break; // fewer messages than asked for
        throw exc;
      }
    }
  }
  return found.sort((a, b) => String(b.publishTime).localeCompare(String(a.publishTime)));
}

export function TopicPage({ parts }) {
  const [tenant, ns, name] = parts;
  const base = topicPath(tenant, ns, name);
  const [stats, error] = usePoll(() => get(`${base}/partitioned-stats`), [base], 3000);
  const [count, setCount] = useState(5);
  const [peeked, setPeeked] = useState(null);
  const [peekError, setPeekError] = useState(null);
  const peek = async () => {
    setPeekError(null);
    try {
      setPeeked(await latest(base, stats ? stats.metadata.partitions : 1, count));
    } catch (exc) {
      setPeekError(exc);
    }
  };
  const partitions = stats ? Object.entries(stats.partitions || {}) : [];
  return html`<section aria-labelledby="topic-title">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/topics">Topics</a> / ${tenant}/${ns}</nav>
    <div class="page-head"><h1 id="topic-title">${name}</h1>
      ${stats && html`<span class="badge tone-off">${stats.schemaType}</span>
        <span class="muted">${stats.metadata.partitions} partition${stats.metadata.partitions === 1 ? "" : "s"} · ${fmt(stats.messages)} retained · ${fmt(stats.storageSize)} bytes</span>`}</div>
    <${ErrorNote} error=${error} />
    ${stats && html`<div class="two">
      <section class="card" aria-labelledby="parts-title"><h2 id="parts-title">Partitions</h2>
        <table class="list compact" data-testid="partitions"><thead><tr><th scope="col">Partition</th><th scope="col">End offset</th><th scope="col">Retained</th><th scope="col">Bytes</th></tr></thead>
        <tbody>${partitions.map(([key, p], i) => html`<tr><td>${i}</td><td>${fmt(p.msgInCounter)}</td><td>${fmt(p.messages)}</td><td>${fmt(p.storageSize)}</td></tr>`)}</tbody></table>
      </section>
      <section class="card" aria-labelledby="subs-title"><h2 id="subs-title">Subscriptions</h2>
        ${Object.keys(stats.subscriptions).length === 0 && html`<p class="muted">None.</p>`}
        ${Object.keys(stats.subscriptions).length > 0 && html`<table class="list compact" data-testid="subscriptions"><thead><tr><th scope="col">Subscription</th><th scope="col">Lag (backlog)</th></tr></thead>
        <tbody>${Object.entries(stats.subscriptions).map(([sub, s]) => html`<tr><td>${sub}</td><td>${fmt(s.msgBacklog)}</td></tr>`)}</tbody></table>`}
      </section></div>`}
    <section class="card" aria-labelledby="peek-title">
      <div class="card-head"><h2 id="peek-title">Latest messages</h2>
        <label>Per partition <input type="number" min="1" max="50" value=${count} class="narrow"
          onInput=${(e) => setCount(Math.max(1, Math.min(50, Number(e.target.value) || 1)))} /></label>
        <button class="primary" onClick=${peek} disabled=${!stats}>Peek</button></div>
      <${ErrorNote} error=${peekError} />
      ${peeked && peeked.length === 0 && html`<p class="muted">The topic holds no message.</p>`}
      ${peeked && peeked.map((m) => html`<article class="message" data-testid="message" key=${m.messageId}>
        <header><code>${m.messageId}</code>${m.key && html` · key <code>${m.key}</code>`} · ${when(m.publishTime)}
          ${m.properties && Object.keys(m.properties).length > 0 && html`<span class="muted"> · ${Object.entries(m.properties).map(([k, val]) => `${k}=${val}`).join(", ")}</span>`}</header>
        <${Payload} message=${m} schemaType=${stats && stats.schemaType} /></article>`)}
    </section>
  </section>`;
}
