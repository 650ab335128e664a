// The one way the dashboard reaches ctasd: openapi-fetch over types that
// openapi-typescript generates from openapi/openapi.json, so a field the
// API renames breaks the build, not the page. The token (when ctasd wants
// one) lives in sessionStorage: entered once, gone with the browser tab.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./api.gen";

export type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type JobStatus = Schemas["JobStatus"];
export type JobEvent = Schemas["JobEvent"];
export type Catalog = Schemas["Catalog"];
export type CatalogType = Schemas["CatalogType"];
export type Problem = Schemas["Problem"];
export type Caller = Schemas["Caller"];
export type Permission = Schemas["Permission"];

const TOKEN_KEY = "ctasd.token";

export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (value: string) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

const bearer: Middleware = {
  onRequest({ request }) {
    const value = token.get();
    if (value) request.headers.set("Authorization", `Bearer ${value}`);
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: location.origin });
api.use(bearer);

/** A problem+json answer, or a failure to reach ctasd at all. */
export class ApiProblem extends Error {
  constructor(
    readonly problem: Problem,
  ) {
    super(problem.detail);
  }

  get status(): number {
    return this.problem.status;
  }

  /** The message for a field (`name`, `options.base-url`), if the server named it. */
  fieldError(field: string): string | undefined {
    return this.problem.errors?.find((e) => e.field === field)?.message;
  }
}

/** Listeners told when a request comes back 401 (the token expired or was revoked). */
const unauthenticated = new Set<() => void>();
export function onUnauthenticated(listener: () => void): () => void {
  unauthenticated.add(listener);
  return () => unauthenticated.delete(listener);
}

/**
 * The data of an openapi-fetch answer, or an ApiProblem. Network failures
 * become a problem too, so every caller handles one kind of error.
 */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let answer;
  try {
    answer = await call;
  } catch (e) {
    throw new ApiProblem({
      type: "about:blank",
      title: "ctasd is unreachable",
      status: 0,
      detail: `the request did not reach ctasd (${e instanceof Error ? e.message : String(e)})`,
      code: "UNREACHABLE",
    });
  }
  const { data, error, response } = answer;
  if (response.ok) return data as T;
  if (response.status === 401) unauthenticated.forEach((listener) => listener());
  if (isProblem(error)) throw new ApiProblem(error);
  throw new ApiProblem({
    type: "about:blank",
    title: response.statusText || "Request failed",
    status: response.status,
    detail: `ctasd answered ${response.status}`,
    code: "UNEXPECTED_ANSWER",
  });
}

function isProblem(value: unknown): value is Problem {
  return typeof value === "object" && value !== null && "detail" in value && "status" in value;
}

/** A fresh Idempotency-Key, so a POST retried by the browser runs once. */
export function idempotencyKey(): string {
  return crypto.randomUUID();
}
