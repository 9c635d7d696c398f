// What runs an agent, in words: Corral's own loop or an agent CLI inside the
// run's sandbox. One table, so the settings form, the agent's header, a
// run's kind and its timeline all name a driver the same way.

import type { Driver } from './types'

export interface DriverInfo {
  id: Driver
  /** Short, for a badge or a run's kind: "Codex CLI". */
  label: string
  /** One line for the settings' select: what it is and the API its model calls speak. */
  hint: string
}

export const drivers: DriverInfo[] = [
  { id: 'builtin', label: 'Built in', hint: 'Corral’s agent loop (built in)' },
  { id: 'codex', label: 'Codex CLI', hint: 'Codex CLI (OpenAI Responses API)' },
  { id: 'claude-code', label: 'Claude Code', hint: 'Claude Code (Anthropic Messages API)' },
  { id: 'opencode', label: 'OpenCode', hint: 'OpenCode (Chat Completions)' },
]

export const driverFieldHint = 'An agent CLI runs inside the run’s sandbox and reaches only Corral’s gateway, metered against the budget.'

/** The table's entry for d; a driver this build does not know (a newer server) is named by its id. */
export function driverInfo(d: string | undefined): DriverInfo {
  const id = d || 'builtin'
  return drivers.find((x) => x.id === id) ?? { id: id as Driver, label: id, hint: id }
}

/** Whether d is an agent CLI (anything but Corral's loop and a person's terminal). */
export function isCLI(d: string | undefined): boolean {
  return !!d && d !== 'builtin' && d !== 'terminal'
}

/** What ran a run, short ("Codex CLI", "Terminal"), or undefined for the agent loop's ordinary run. */
export function runDriverLabel(d: string | undefined): string | undefined {
  if (!d || d === 'builtin') return undefined
  if (d === 'terminal') return 'Terminal'
  return driverInfo(d).label
}

/** What kind of run a run of this driver is ("Codex CLI run"), or undefined for the agent loop's ordinary run. */
export function runKind(d: string | undefined): string | undefined {
  const label = runDriverLabel(d)
  return label && `${label} run`
}

const protocols: Record<string, string> = {
  chat: 'Chat Completions',
  responses: 'Responses API',
  messages: 'Messages API',
}

/** The wire protocol a CLI's model call spoke to the gateway, in words. */
export function protocolName(p: string): string {
  return protocols[p] ?? p
}
