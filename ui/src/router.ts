// Routing in the browser over the History API: ctasd answers every path
// under /ui/ with the app's page, and the app draws the route.
import { useEffect, useState } from "preact/hooks";

export const BASE = "/ui";

const listeners = new Set<() => void>();
window.addEventListener("popstate", () => listeners.forEach((l) => l()));

/** Goes to an app path (`/jobs/abc?x=1`, without the /ui prefix). */
export function navigate(path: string, replace = false): void {
  const url = BASE + path;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  listeners.forEach((l) => l());
  if (!replace) window.scrollTo(0, 0);
}

export interface Location {
  /** The path under /ui, with a leading slash. */
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  const rest = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "/";
  return { path: rest || "/", query: new URLSearchParams(location.search) };
}

export function useLocation(): Location {
  const [value, setValue] = useState(current);
  useEffect(() => {
    const update = () => setValue(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return value;
}

/** The parts of `path` matched against `pattern` (`/jobs/:id`), or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/");
  const have = path.replace(/\/$/, "").split("/");
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    const value = have[i] ?? "";
    if (part.startsWith(":")) params[part.slice(1)] = decodeURIComponent(value);
    else if (part !== value) return null;
  }
  return params;
}

/** Whether a click should be left to the browser (new tab, download...). */
export function isModifiedClick(event: MouseEvent): boolean {
  return event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey;
}
