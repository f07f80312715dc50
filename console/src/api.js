// The REST API, with the token the user gave (kept for this browser tab only).
import { signal } from "./signal.js";

const TOKEN_KEY = "sparkfn.token";
export const tokenNeeded = signal(false);
export const tokenError = signal("");

export class ApiError extends Error {
  constructor(status, reason, message) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export async function request(method, path, body, { raw = false } = {}) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  let payload = body;
  if (body !== undefined && !(body instanceof FormData)) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(path, { method, headers, body: payload });
  if (response.status === 401) {
    const found = await response.json().catch(() => ({}));
    tokenError.set(t ? `The worker refused the token: ${found.message || "401"}` : "");
    tokenNeeded.set(true);
    throw new ApiError(401, found.reason || "unauthorized", found.message || "unauthorized");
  }
  if (!response.ok) {
    const found = await response.json().catch(() => ({}));
    throw new ApiError(
      response.status,
      found.reason || `http_${response.status}`,
      found.message || response.statusText,
    );
  }
  if (raw) return response;
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body);
export const put = (path, body) => request("PUT", path, body);
export const del = (path) => request("DELETE", path);

export const fnPath = (fqfn) =>
  `/admin/v3/functions/${fqfn.split("/").map(encodeURIComponent).join("/")}`;
export const topicPath = (tenant, ns, topic) =>
  `/admin/v2/persistent/${[tenant, ns, topic].map(encodeURIComponent).join("/")}`;

// A config field by its snake_case name, whichever spelling the worker answers with
// (sparkfn's snake_case, or Pulsar's camelCase FunctionConfig).
export function field(config, snake) {
  if (!config) return undefined;
  if (snake in config) return config[snake];
  const camel = snake.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  if (camel in config) return config[camel];
  return undefined;
}

// tenant/namespace/name of a topic as a config names it (a short name is public/default's).
export function topicParts(text) {
  const bare = String(text).replace(/^(non-)?persistent:\/\//, "");
  const parts = bare.split("/");
  if (parts.length === 1) return ["public", "default", parts[0]];
  return parts;
}
