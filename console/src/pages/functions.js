// Every function, by tenant and namespace, a page at a time; searched and filtered on the worker.
import { useEffect, useState } from "preact/hooks";
import { get } from "../api.js";
import { Badge, ErrorNote, usePoll } from "../common.js";
import { html } from "../html.js";

const PAGE = 50;
const FILTERS = ["RUNNING", "PARKED", "STOPPED", "SUSPENDED", "ERROR", "CREATED"];

function useDebounced(value, ms) {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value]);
  return settled;
}

function Instances({ fn }) {
  const byId = new Map(fn.instances.map((i) => [i.instanceId, i]));
  const ids = Array.from({ length: Math.max(fn.parallelism, fn.instances.length) }, (_, i) => i);
  return html`<span class="dots" aria-label="instances">
    ${ids.map((id) => {
      const inst = byId.get(id);
      const state = inst ? inst.state : "CREATED";
      return html`<span class="dot tone-${state}" title="instance ${id}: ${state}${inst && inst.cause ? ` (${inst.cause})` : ""}"
        data-instance=${id} data-state=${state}></span>`;
    })}
  </span>`;
}

async function everyNamespace() {
  const found = [];
  for (const tenant of await get("/admin/v2/tenants"))
    found.push(...(await get(`/admin/v2/namespaces/${encodeURIComponent(tenant)}`)));
  return found;
}

export function FunctionList() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const [search, setSearch] = useState(params.get("q") || "");
  const [state, setState] = useState(params.get("state") || "");
  const [namespace, setNamespace] = useState(params.get("ns") || "");
  const [namespaces] = usePoll(everyNamespace, [], 30000);
  const [offset, setOffset] = useState(Number(params.get("offset") || 0));
  const query = useDebounced(search, 150);
  useEffect(() => setOffset(0), [query, state, namespace]);
  useEffect(() => {
    const q = new URLSearchParams();
    if (query) q.set("q", query);
    if (state) q.set("state", state);
    if (namespace) q.set("ns", namespace);
    if (offset) q.set("offset", offset);
    const next = `#/functions${q.toString() ? `?${q}` : ""}`;
    if (location.hash !== next) history.replaceState(null, "", next);
  }, [query, state, namespace, offset]);
  const [page, error] = usePoll(
    () => {
      const q = new URLSearchParams({ search: query, offset, limit: PAGE });
      if (state) q.set("state", state);
      if (namespace) q.set("namespace", namespace);
      return get(`/admin/v3/functions?${q}`);
    },
    [query, state, namespace, offset],
    3000,
  );
  let lastNs = null;
  const total = page ? page.total : 0;
  return html`<section aria-labelledby="fn-title">
    <div class="page-head">
      <h1 id="fn-title">Functions</h1>
      <a class="button primary" href="#/new">New function</a>
    </div>
    <div class="toolbar">
      <label class="search">
        <span class="sr-only">Search functions</span>
        <input type="search" data-search placeholder="Search tenant/namespace/name  ( / )"
          value=${search} onInput=${(e) => setSearch(e.target.value)} aria-describedby="fn-count" />
      </label>
      <label class="inline-label">Namespace
        <select value=${namespace} onChange=${(e) => setNamespace(e.target.value)}>
          <option value="">all</option>
          ${(namespaces || []).map((ns) => html`<option value=${ns}>${ns}</option>`)}
        </select>
      </label>
      <div class="chips" role="group" aria-label="Filter by state">
        <button class="chip" aria-pressed=${state === ""} onClick=${() => setState("")}>
          All ${page ? html`<span class="count">${Object.values(page.states).reduce((a, b) => a + b, 0)}</span>` : ""}
        </button>
        ${FILTERS.map(
          (s) => html`<button class="chip" aria-pressed=${state === s} onClick=${() => setState(state === s ? "" : s)}>
            ${s.toLowerCase()} <span class="count">${page ? page.states[s] || 0 : ""}</span>
          </button>`,
        )}
      </div>
    </div>
    <${ErrorNote} error=${error} />
    <p id="fn-count" class="muted" data-testid="fn-count">
      ${page ? (total ? `${page.offset + 1}–${page.offset + page.functions.length} of ${total}` : "No function matches") : "Loading…"}
    </p>
    ${page && page.functions.length > 0 && html`<table class="list">
      <thead><tr><th scope="col">Function</th><th scope="col">State</th><th scope="col">Instances</th>
        <th scope="col">Version</th><th scope="col">Wanted</th></tr></thead>
      <tbody>
        ${page.functions.map((fn) => {
          const ns = `${fn.tenant}/${fn.namespace}`;
          const head = ns !== lastNs;
          lastNs = ns;
          return html`${head && html`<tr class="group"><th colspan="5" scope="rowgroup">${ns}</th></tr>`}
            <tr data-fqfn=${fn.fqfn}>
              <td><a href=${`#/functions/${fn.fqfn}`}>${fn.name}</a></td>
              <td><${Badge} state=${fn.state} /></td>
              <td><${Instances} fn=${fn} /></td>
              <td>v${fn.version}</td>
              <td class="muted">${fn.desired}</td>
            </tr>`;
        })}
      </tbody>
    </table>`}
    ${page && total > PAGE && html`<nav class="pager" aria-label="Pages">
      <button disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - PAGE))}>← Previous</button>
      <span>Page ${Math.floor(offset / PAGE) + 1} of ${Math.ceil(total / PAGE)}</span>
      <button disabled=${offset + PAGE >= total} onClick=${() => setOffset(offset + PAGE)}>Next →</button>
    </nav>`}
  </section>`;
}
