// Polling is bounded: one request at a time, each aborted after its
// timeout, the loop given up after its deadline, and stopped for good.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { poll } from './poll'

beforeEach(() => vi.useFakeTimers())
afterEach(() => vi.useRealTimers())

const opts = { intervalMs: 100, timeoutMs: 1000, deadlineMs: 10_000 }

describe('poll', () => {
  it('asks until the answer says done, one request at a time', async () => {
    const answers = [10, 50, 100]
    const load = vi.fn(async () => answers.shift()!)
    const seen: number[] = []
    poll(load, { onValue: (v) => (seen.push(v), v < 100) }, opts)
    await vi.advanceTimersByTimeAsync(1000)
    expect(seen).toEqual([10, 50, 100])
    expect(load).toHaveBeenCalledTimes(3)
  })

  it('aborts a request that takes longer than its timeout, and goes on', async () => {
    const signals: AbortSignal[] = []
    let n = 0
    const load = (signal: AbortSignal) => {
      signals.push(signal)
      if (n++ === 0) return new Promise<number>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))))
      return Promise.resolve(7)
    }
    const errors: unknown[] = []
    const values: number[] = []
    poll(load, { onValue: (v) => (values.push(v), false), onError: (e) => errors.push(e) }, opts)
    await vi.advanceTimersByTimeAsync(opts.intervalMs + opts.timeoutMs - 1)
    expect(signals[0].aborted).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(signals[0].aborted).toBe(true)
    expect(errors.length).toBe(1)
    await vi.advanceTimersByTimeAsync(opts.intervalMs)
    expect(values).toEqual([7])
  })

  it('gives up after the deadline', async () => {
    const load = vi.fn(async () => 1)
    const gaveUp = vi.fn()
    poll(load, { onValue: () => true, onGiveUp: gaveUp }, opts)
    await vi.advanceTimersByTimeAsync(opts.deadlineMs + 5 * opts.intervalMs)
    expect(gaveUp).toHaveBeenCalledTimes(1)
    const calls = load.mock.calls.length
    await vi.advanceTimersByTimeAsync(10 * opts.intervalMs)
    expect(load.mock.calls.length).toBe(calls)
  })

  it('stops when told, aborting the request in flight', async () => {
    let signal: AbortSignal | undefined
    const load = (s: AbortSignal) => {
      signal = s
      return new Promise<number>(() => {})
    }
    const onValue = vi.fn(() => true)
    const stop = poll(load, { onValue }, opts)
    await vi.advanceTimersByTimeAsync(opts.intervalMs)
    stop()
    expect(signal?.aborted).toBe(true)
    await vi.advanceTimersByTimeAsync(10 * opts.intervalMs)
    expect(onValue).not.toHaveBeenCalled()
  })
})
