// An agent's limits in units a person reads (MiB, minutes, counts) and
// the API's whole numbers (bytes, seconds, milliseconds) they are sent as.
// Pure: the settings form and its tests share it.

import { isCLI } from './drivers'
import type { Limits, LimitsInfo } from './types'

/** What a limit counts, as the API sends it. */
export type LimitKind = 'bytes' | 'seconds' | 'millis' | 'count'

export interface Unit {
  /** The select's value and label: "MiB", "minutes". */
  id: string
  /** How many of the API's unit one of these is. */
  factor: number
  /** How a value reads with it: "MiB", "min". */
  short: string
}

const KiB = 1024

export const units: Record<LimitKind, Unit[]> = {
  bytes: [
    { id: 'bytes', factor: 1, short: 'bytes' },
    { id: 'KiB', factor: KiB, short: 'KiB' },
    { id: 'MiB', factor: KiB ** 2, short: 'MiB' },
    { id: 'GiB', factor: KiB ** 3, short: 'GiB' },
    { id: 'TiB', factor: KiB ** 4, short: 'TiB' },
  ],
  seconds: [
    { id: 'seconds', factor: 1, short: 's' },
    { id: 'minutes', factor: 60, short: 'min' },
    { id: 'hours', factor: 3600, short: 'h' },
    { id: 'days', factor: 86400, short: 'days' },
  ],
  millis: [
    { id: 'seconds', factor: 1000, short: 's' },
    { id: 'minutes', factor: 60_000, short: 'min' },
    { id: 'hours', factor: 3_600_000, short: 'h' },
  ],
  count: [{ id: '', factor: 1, short: '' }],
}

/** Each limit of an agent: what it counts and how the form names it. */
export const limitFields: { key: keyof Limits; label: string; kind: LimitKind }[] = [
  { key: 'max_prompt_bytes', label: 'Largest prompt', kind: 'bytes' },
  { key: 'max_runs', label: 'Most runs', kind: 'count' },
  { key: 'run_timeout_s', label: 'Run time limit', kind: 'seconds' },
  { key: 'cpu_millis', label: 'CPU time per run', kind: 'millis' },
  { key: 'memory_bytes', label: 'Memory', kind: 'bytes' },
  { key: 'pids', label: 'Processes at once', kind: 'count' },
  { key: 'output_bytes', label: 'Output per command', kind: 'bytes' },
  { key: 'disk_bytes', label: 'Disk per run', kind: 'bytes' },
  { key: 'disk_inodes', label: 'Files per run', kind: 'count' },
  { key: 'pending_disk_bytes', label: 'Disk held by changes waiting for review', kind: 'bytes' },
]

/** The API's own unit, in words. */
const baseName: Record<LimitKind, string> = { bytes: 'byte', seconds: 'second', millis: 'millisecond', count: '' }

/** The unit an empty field starts in. */
const emptyUnit: Record<LimitKind, string> = { bytes: 'MiB', seconds: 'minutes', millis: 'minutes', count: '' }

function unitOf(kind: LimitKind, id: string): Unit | undefined {
  return units[kind].find((u) => u.id === id)
}

/**
 * The largest unit that shows n as a whole number (512 MiB, not 0.5 GiB),
 * so that reading a value and saving it again never changes it.
 */
export function exactUnit(kind: LimitKind, n: number): Unit {
  const all = units[kind]
  for (let i = all.length - 1; i > 0; i--) {
    if (n >= all[i].factor && n % all[i].factor === 0) return all[i]
  }
  return all[0]
}

/** An API value as the form shows it; 0 (the server's default) is an empty field. */
export function toHuman(kind: LimitKind, n: number): { value: string; unit: string } {
  if (!n) return { value: '', unit: emptyUnit[kind] }
  const u = exactUnit(kind, n)
  return { value: String(n / u.factor), unit: u.id }
}

/**
 * What a person typed, in unit, as the API's whole number: "" is 0 (the
 * server's default). Throws an Error in words for anything else that is not
 * a number of at least one of the API's units.
 */
export function fromHuman(kind: LimitKind, value: string, unit: string): number {
  const t = value.trim()
  if (t === '') return 0
  const u = unitOf(kind, unit)
  if (!u) throw new Error(`“${unit}” is not a unit of this limit.`)
  if (!/^\d+(\.\d+)?$/.test(t)) {
    throw new Error(kind === 'count' ? 'must be a whole number, or empty for the server’s default.' : 'must be a number, or empty for the server’s default.')
  }
  const v = Number(t)
  if (kind === 'count' && !Number.isInteger(v)) throw new Error('must be a whole number, or empty for the server’s default.')
  const n = Math.round(v * u.factor)
  if (v > 0 && n === 0) throw new Error(`is less than one ${baseName[kind]}.`)
  if (!Number.isSafeInteger(n)) throw new Error('is too large.')
  return n
}

/** A value in words: "512 MiB", "30 min", "100,000"; null is "no limit". */
export function formatLimit(kind: LimitKind, n: number | null): string {
  if (n === null) return 'no limit'
  if (kind === 'count') return n.toLocaleString('en-US')
  const all = units[kind]
  let u = all[0]
  for (const c of all) if (n >= c.factor) u = c
  const v = Math.round((n / u.factor) * 10) / 10
  return `${v} ${u.short}`
}

/** A limit as the form holds it: what was typed, in which unit. */
export interface HumanValue {
  value: string
  unit: string
}

/**
 * What a limit is when left empty, in words: the server's default (GET
 * /api/limits), with what depends on the rest of the form (the CPU time
 * follows the run's time limit; an agent CLI gets the memory it needs).
 */
export function defaultWords(key: keyof Limits, kind: LimitKind, info: LimitsInfo | undefined, v: { driver: string; limits: Record<keyof Limits, HumanValue> }): string {
  if (!info) return 'Empty: the server’s default.'
  const d = info.defaults[key]
  if (key === 'cpu_millis') {
    let timeout: number | null = info.defaults.run_timeout_s
    try {
      timeout = fromHuman('seconds', v.limits.run_timeout_s.value, v.limits.run_timeout_s.unit) || timeout
    } catch {
      // the run time is not a number yet: the server's default
    }
    return timeout === null ? `default: ${formatLimit(kind, d)}` : `default: the run’s time on one core (${formatLimit('seconds', timeout)})`
  }
  if (key === 'memory_bytes' && isCLI(v.driver)) return `default: what the CLI needs, at least ${formatLimit(kind, d)}`
  return `default: ${formatLimit(kind, d)}`
}
