// Following something the server is still doing (a clone) by asking again
// and again: one request at a time, each cut off after timeoutMs, the whole
// loop given up after deadlineMs so a page left open does not poll forever.

export interface PollOptions {
  /** Wait between the end of one answer and the next request. */
  intervalMs: number
  /** The longest one request may take before it is aborted. */
  timeoutMs: number
  /** How long to poll at all before giving up. */
  deadlineMs: number
}

export interface PollHandlers<T> {
  /** Each answer; return true to keep polling. */
  onValue: (t: T) => boolean
  /** A failed or timed-out request; polling goes on until the deadline. */
  onError?: (err: unknown) => void
  /** The deadline passed while still going. */
  onGiveUp?: () => void
}

/** Starts polling load; the function returned stops it (and aborts a request in flight). */
export function poll<T>(load: (signal: AbortSignal) => Promise<T>, h: PollHandlers<T>, opts: PollOptions): () => void {
  let stopped = false
  let wait: ReturnType<typeof setTimeout> | undefined
  let inFlight: AbortController | undefined
  const deadline = Date.now() + opts.deadlineMs

  async function once() {
    if (stopped) return
    if (Date.now() > deadline) {
      stopped = true
      h.onGiveUp?.()
      return
    }
    const ctl = new AbortController()
    inFlight = ctl
    const cut = setTimeout(() => ctl.abort(), opts.timeoutMs)
    let more = true
    try {
      const v = await load(ctl.signal)
      if (stopped) return
      more = h.onValue(v)
    } catch (err) {
      if (stopped) return
      h.onError?.(err)
    } finally {
      clearTimeout(cut)
      inFlight = undefined
    }
    if (!more) {
      stopped = true
      return
    }
    wait = setTimeout(() => void once(), opts.intervalMs)
  }

  wait = setTimeout(() => void once(), opts.intervalMs)
  return () => {
    stopped = true
    clearTimeout(wait)
    inFlight?.abort()
  }
}
