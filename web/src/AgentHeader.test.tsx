// The agent header shows the agent's state and its driver when an agent CLI
// runs it, offers Release to the owner of a quarantined agent only, and
// "Accept as a delegation target" to someone who may run a shared agent
// and has not accepted it.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { AgentHeader } from './AgentHeader'
import { api } from './api'
import { ApiError } from './errors'
import { agentAt } from './testkit'
import type { Agent, AgentState, Driver, Level } from './types'

function agent(access: Level, state: AgentState): Agent {
  return { ...agentAt(access), state, budget: { tokens: 100, used: 100, reserved: 0, left: 0 } }
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

  const consent: { access: Level; accepted: boolean; offered: boolean }[] = [
    { access: 'runner', accepted: false, offered: true },
    { access: 'editor', accepted: false, offered: true },
    { access: 'runner', accepted: true, offered: false },
    // A viewer's runs could not hand work to it anyway; an owner's agent always is a target.
    { access: 'viewer', accepted: false, offered: false },
    { access: 'owner', accepted: true, offered: false },
  ]
  for (const c of consent) {
    it(`${c.offered ? 'offers' : 'does not offer'} ${c.access === 'editor' || c.access === 'owner' ? 'an' : 'a'} ${c.access} ${c.accepted ? 'who accepted' : 'who did not accept'} to accept it as a delegation target`, () => {
      render(<AgentHeader agent={{ ...agent(c.access, 'active'), accepted: c.accepted }} section="conversation" onChange={() => {}} />)
      expect(screen.queryAllByRole('button', { name: 'Accept as a delegation target' })).toHaveLength(c.offered ? 1 : 0)
      expect(document.body.textContent?.includes('cannot hand work to it')).toBe(c.offered)
    })
  }

  it('accepts a shared agent as a delegation target and hands on that it is', async () => {
    const spy = vi.spyOn(api, 'acceptAgent').mockResolvedValue(undefined)
    const onChange = vi.fn()
    const shared = { ...agent('runner', 'active'), accepted: false }
    render(<AgentHeader agent={shared} section="conversation" onChange={onChange} />)
    fireEvent.click(screen.getByRole('button', { name: 'Accept as a delegation target' }))
    await waitFor(() => expect(onChange).toHaveBeenCalledWith({ ...shared, accepted: true }))
    expect(spy).toHaveBeenCalledWith('agt_1')
  })

  it('shows why accepting failed and changes nothing', async () => {
    vi.spyOn(api, 'acceptAgent').mockRejectedValue(new ApiError(404, 'not_found', 'agent not found'))
    const onChange = vi.fn()
    render(<AgentHeader agent={{ ...agent('runner', 'active'), accepted: false }} section="conversation" onChange={onChange} />)
    fireEvent.click(screen.getByRole('button', { name: 'Accept as a delegation target' }))
    expect((await screen.findByRole('alert')).textContent).toContain('agent not found')
    expect(onChange).not.toHaveBeenCalled()
  })

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
