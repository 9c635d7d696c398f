// The agent header shows the agent's state and its driver when an agent CLI
// runs it, and offers Release to the owner of a quarantined agent only.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { AgentHeader } from './AgentHeader'
import { api } from './api'
import type { Agent, AgentState, Driver, Level } from './types'

function agent(access: Level, state: AgentState): Agent {
  return {
    id: 'agt_1',
    name: 'helper',
    instructions: '',
    model: '',
    driver: 'builtin',
    owner: { id: 'usr_owner', name: 'Olive' },
    access,
    policy: { fs: 'read-write', changes: 'review', network: 'none', exclude: [], protected: [], risky: [] },
    limits: { max_prompt_bytes: 0, max_runs: 0, run_timeout_s: 0, cpu_millis: 0, memory_bytes: 0, pids: 0, output_bytes: 0, disk_bytes: 0, disk_inodes: 0, pending_disk_bytes: 0 },
    budget: { tokens: 100, used: 100, reserved: 0, left: 0 },
    state,
    created_at: '2025-01-01T00:00:00Z',
    updated_at: '2025-01-01T00:00:00Z',
  }
}

afterEach(() => vi.restoreAllMocks())

describe('AgentHeader', () => {
  const cases: { access: Level; state: AgentState; release: boolean; text: string }[] = [
    { access: 'owner', state: 'quarantined', release: true, text: 'until you release it' },
    { access: 'editor', state: 'quarantined', release: false, text: 'until its owner releases it' },
    { access: 'viewer', state: 'quarantined', release: false, text: 'until its owner releases it' },
    { access: 'owner', state: 'paused', release: false, text: 'Raise the budget in Settings' },
    { access: 'runner', state: 'paused', release: false, text: 'Its owner can raise the budget' },
    { access: 'owner', state: 'active', release: false, text: '' },
  ]
  for (const c of cases) {
    it(`shows a ${c.access} a ${c.state} agent`, () => {
      render(<AgentHeader agent={agent(c.access, c.state)} section="conversation" onChange={() => {}} />)
      expect(screen.queryAllByRole('button', { name: 'Release' })).toHaveLength(c.release ? 1 : 0)
      expect(screen.getByText(c.state)).toBeTruthy()
      if (c.text) expect(document.body.textContent).toContain(c.text)
    })
  }

  const drivers: { driver: Driver; badge: string | null }[] = [
    { driver: 'builtin', badge: null },
    { driver: 'codex', badge: 'Codex CLI' },
    { driver: 'claude-code', badge: 'Claude Code' },
    { driver: 'opencode', badge: 'OpenCode' },
  ]
  for (const c of drivers) {
    it(`shows the ${c.driver} driver ${c.badge ? 'as a badge' : 'as nothing'}`, () => {
      render(<AgentHeader agent={{ ...agent('viewer', 'active'), driver: c.driver }} section="conversation" onChange={() => {}} />)
      const badge = document.querySelector('.badge-driver')
      expect(badge?.textContent ?? null).toBe(c.badge)
      expect(document.body.textContent?.includes('Driver:')).toBe(c.badge !== null)
    })
  }

  it('releases a quarantined agent and hands on what the server answered', async () => {
    const released = { ...agent('owner', 'active') }
    const spy = vi.spyOn(api, 'releaseAgent').mockResolvedValue(released)
    const onChange = vi.fn()
    render(<AgentHeader agent={agent('owner', 'quarantined')} section="conversation" onChange={onChange} />)
    fireEvent.click(screen.getByRole('button', { name: 'Release' }))
    await waitFor(() => expect(onChange).toHaveBeenCalledWith(released))
    expect(spy).toHaveBeenCalledWith('agt_1')
  })
})
