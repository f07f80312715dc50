// A tiny observable value, for the state a few components share (the token prompt).
import { useEffect, useState } from "preact/hooks";

export function signal(initial) {
  let value = initial;
  const listeners = new Set();
  return {
    get: () => value,
    set(next) {
      value = next;
      for (const listener of listeners) listener(next);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export function useSignal(s) {
  const [value, setValue] = useState(s.get());
  useEffect(() => s.subscribe(setValue), [s]);
  return value;
}
