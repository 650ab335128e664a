// Live data without reloading: a loader run now and again every `everyMs`
// while the page is open (paused while the tab is hidden). Polling keeps
// ctasd stateless between replicas; a job page costs two reads a second.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiProblem } from "./api";

export interface Polled<T> {
  data: T | undefined;
  problem: ApiProblem | undefined;
  /** Loads now (after a change the user made). */
  reload: () => Promise<void>;
}

export function usePoll<T>(load: () => Promise<T>, everyMs: number, deps: unknown[]): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [problem, setProblem] = useState<ApiProblem | undefined>(undefined);
  const generation = useRef(0);
  const inFlight = useRef(false);
  const run = useCallback(load, deps);

  const reload = useCallback(async () => {
    const mine = generation.current;
    inFlight.current = true;
    try {
      const value = await run();
      if (generation.current !== mine) return;
      setData(value);
      setProblem(undefined);
    } catch (e) {
      if (generation.current !== mine) return;
      setProblem(e instanceof ApiProblem ? e : new ApiProblem({
        type: "about:blank", title: "Error", status: 0, detail: String(e), code: "CLIENT_ERROR",
      }));
    } finally {
      inFlight.current = false;
    }
  }, [run]);

  useEffect(() => {
    generation.current += 1;
    setData(undefined);
    setProblem(undefined);
    void reload();
    if (everyMs <= 0) return;
    const timer = window.setInterval(() => {
      // A slow answer is not piled on: the next tick waits for it.
      if (document.visibilityState === "visible" && !inFlight.current) void reload();
    }, everyMs);
    return () => {
      window.clearInterval(timer);
      generation.current += 1;
    };
  }, [reload, everyMs]);

  return { data, problem, reload };
}
