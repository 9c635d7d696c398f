// Turning what went wrong into words for people. The server's error
// messages are written for people already; this fills in the few cases the
// server cannot word for us (throttling with its wait, no answer at all).

/** An error answer from the API, or a request that got no answer. */
export class ApiError extends Error {
  /** The HTTP status; 0 when the server could not be reached. */
  readonly status: number
  /** The machine code from the answer (`not_found`, `throttled`, ...), or `network`. */
  readonly code: string
  /** Refines `admission_denied` (`busy`, `prompt_too_large`, ...). */
  readonly reason?: string
  /** Seconds from a `Retry-After` header, when there was one. */
  readonly retryAfter?: number

  constructor(status: number, code: string, message: string, opts: { reason?: string; retryAfter?: number } = {}) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
    this.reason = opts.reason
    this.retryAfter = opts.retryAfter
  }
}

/** Parses a Retry-After header given in seconds; an HTTP date or junk gives undefined. */
export function parseRetryAfter(header: string | null | undefined): number | undefined {
  if (!header) return undefined
  const trimmed = header.trim()
  if (!/^\d+$/.test(trimmed)) return undefined
  return Number(trimmed)
}

/**
 * Builds the ApiError for an error answer from its status, its parsed body
 * (anything: the body may not be JSON) and its Retry-After header.
 */
export function errorFromAnswer(status: number, body: unknown, retryAfterHeader?: string | null): ApiError {
  const retryAfter = parseRetryAfter(retryAfterHeader)
  const e = (body as { error?: { code?: unknown; message?: unknown; reason?: unknown } } | null)?.error
  if (e && typeof e.code === 'string') {
    const message = typeof e.message === 'string' && e.message !== '' ? e.message : fallbackMessage(status)
    const reason = typeof e.reason === 'string' ? e.reason : undefined
    return new ApiError(status, e.code, message, { reason, retryAfter })
  }
  return new ApiError(status, codeForStatus(status), fallbackMessage(status), { retryAfter })
}

/** The error for a request that never got an answer. */
export function networkError(): ApiError {
  return new ApiError(0, 'network', 'Could not reach the server. Check your connection and try again.')
}

/** The words to show for any error thrown by an API call. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.code === 'throttled' || err.status === 429) {
      if (err.retryAfter !== undefined) {
        const n = err.retryAfter
        return `Too many attempts. Try again in ${n} ${n === 1 ? 'second' : 'seconds'}.`
      }
      return 'Too many attempts. Try again in a little while.'
    }
    return err.message
  }
  if (err instanceof Error && err.message) return `Something went wrong: ${err.message}`
  return 'Something went wrong.'
}

/** Whether err means the thing asked for does not exist or is not ours to see. */
export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404
}

function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_input'
    case 401:
      return 'unauthenticated'
    case 403:
      return 'forbidden'
    case 404:
      return 'not_found'
    case 409:
      return 'conflict'
    case 413:
      return 'too_large'
    case 429:
      return 'throttled'
    case 503:
      return 'unavailable'
    default:
      return 'internal'
  }
}

function fallbackMessage(status: number): string {
  switch (status) {
    case 401:
      return 'Please log in.'
    case 403:
      return 'You are not allowed to do this.'
    case 404:
      return 'Not found.'
    case 413:
      return 'That is too large.'
    case 429:
      return 'Too many attempts. Try again in a little while.'
    case 502:
    case 503:
    case 504:
      return 'The server is not available right now. Try again shortly.'
    default:
      return `The server could not do this (HTTP ${status}).`
  }
}
