// Requests to the app the page came from. Every URL is relative to the app's root (this
// file's folder's parent), so that the page works under a mount prefix.

/** The app's root URL (`/`, or `/journal/` under a mount). */
export const root = new URL('../', import.meta.url);

/** A URL of the app: `path` relative to its root, `params` as the query (arrays repeat;
 * empty values are left out). */
export function url(path, params = {}) {
  const result = new URL(path, root);
  for (const [name, value] of Object.entries(params)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null && item !== '') {
        result.searchParams.append(name, String(item));
      }
    }
  }
  return result;
}

/** A failed request: the HTTP `status` (0: no answer), the server's problem document and the
 * seconds its `Retry-After` asks for (null: none). */
export class ApiError extends Error {
  constructor(status, problem, retryAfter = null) {
    const detail = problem && typeof problem.detail === 'string' ? problem.detail : '';
    super(detail || (status ? `the server answered ${status}` : 'the server did not answer'));
    this.status = status;
    this.problem = problem || {};
    this.code = this.problem.code || (status ? 'http' : 'network');
    this.retryAfterS = retryAfter;
  }
}

/** The seconds a `Retry-After` value asks for (seconds or an HTTP date; null: none). */
function retryAfterSeconds(value) {
  if (value === null || value.trim() === '') return null;
  if (/^[0-9]+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - Date.now()) / 1000)) : null;
}

async function answered(request) {
  let response;
  try {
    response = await request;
  } catch (error) {
    throw new ApiError(0, { detail: `the server did not answer (${error.message})` });
  }
  if (!response.ok) {
    let problem;
    try {
      problem = await response.json();
    } catch {
      problem = null;
    }
    throw new ApiError(response.status, problem, retryAfterSeconds(response.headers.get('retry-after')));
  }
  return response;
}

/** The JSON document at `path` (`ApiError` when the request fails). */
export async function getJSON(path, params = {}) {
  const response = await answered(fetch(url(path, params), { cache: 'no-store' }));
  return response.json();
}

/** Trade `token` for the cookie (`POST api/session`); the token goes in a header, never in a
 * URL. */
export async function signIn(token) {
  await answered(fetch(url('api/session'), {
    method: 'POST',
    cache: 'no-store',
    headers: { authorization: `Bearer ${token}` },
  }));
}
