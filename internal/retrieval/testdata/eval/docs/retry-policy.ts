/**
 * Retry policy for quern's HTTP client.
 *
 * quern talks to the platform API over unreliable networks: home connections,
 * hotel Wi-Fi, corporate proxies. A transfer of many gigabytes makes thousands
 * of requests, and some of them will fail for reasons that go away on their
 * own. This module decides which failures are worth another attempt and how
 * long to wait before it.
 *
 * The rules:
 *
 * - Only idempotent requests are retried. Every upload part carries its own
 *   part number and checksum, so sending it twice is harmless.
 * - Retried statuses are 429 (the workspace quota), 502, 503 and 504, plus
 *   network errors such as a reset connection or a DNS failure. A 4xx other
 *   than 429 is never retried: asking again will not change the answer.
 * - Waits grow exponentially: 500 ms before the second attempt, then doubling
 *   each time, capped at 30 seconds.
 * - Each wait is randomised by plus or minus 20%, so that many clients that
 *   failed at the same moment do not all retry at the same moment too.
 * - A Retry-After header from the server always wins over the computed wait,
 *   as long as it is not more than 5 minutes away.
 * - A request is attempted at most 6 times in total. After the last failure
 *   the command ends with exit code 4, network error.
 *
 * The timeout for each single attempt comes from the `timeout` setting, 30
 * seconds by default, and is not part of this policy.
 */

/** Statuses that may succeed if the same request is sent again. */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** The whole policy, exported so tests can shorten the waits. */
export interface RetryPolicy {
  /** Total attempts, including the first one. */
  maxAttempts: number;
  /** Wait before the second attempt, in milliseconds. */
  baseDelayMs: number;
  /** Growth of the wait after each failed attempt. */
  factor: number;
  /** No computed wait is longer than this, in milliseconds. */
  maxDelayMs: number;
  /** Random spread applied to each wait, as a fraction. */
  jitter: number;
  /** Longest Retry-After the client accepts, in milliseconds. */
  maxRetryAfterMs: number;
}

export const DEFAULT_POLICY: RetryPolicy = {
  maxAttempts: 6,
  baseDelayMs: 500,
  factor: 2,
  maxDelayMs: 30_000,
  jitter: 0.2,
  maxRetryAfterMs: 300_000,
};

/**
 * Returns how long to wait before attempt number `attempt` (2 for the first
 * retry), or null when no further attempt should be made.
 *
 * `random` is injected so that tests get the same waits on every run.
 */
export function nextDelay(
  attempt: number,
  status: number | "network",
  retryAfterSeconds: number | undefined,
  policy: RetryPolicy = DEFAULT_POLICY,
  random: () => number = Math.random,
): number | null {
  if (attempt > policy.maxAttempts) {
    return null;
  }
  if (status !== "network" && !RETRYABLE_STATUSES.has(status)) {
    return null;
  }
  if (retryAfterSeconds !== undefined) {
    const ms = retryAfterSeconds * 1000;
    if (ms <= policy.maxRetryAfterMs) {
      return ms;
    }
  }
  const exponential = policy.baseDelayMs * policy.factor ** (attempt - 2);
  const capped = Math.min(exponential, policy.maxDelayMs);
  const spread = 1 + policy.jitter * (2 * random() - 1);
  return Math.round(capped * spread);
}
