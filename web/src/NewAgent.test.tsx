// Creating an agent from a repository or an uploaded archive: the agent is
// created, then the clone is started or the archive uploaded with its
// progress shown; a refusal after creation says so in the server's words
// and does not offer to create a second agent.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { NewAgentPage } from './pages/NewAgent'
import { agentAt, FakeXHR, serveRoutes, stubXHR } from './testkit'

beforeEach(() => window.history.replaceState(null, '', '/agents/new'))
afterEach(() => vi.unstubAllGlobals())

function serve() {
  return serveRoutes((method, url) => {
    if (method === 'POST' && url === '/api/agents') return [201, agentAt('owner', 'agt_9')]
    if (method === 'PUT' && url === '/api/agents/agt_9/repository') return [202, { url: 'x', ref: '', head: '', status: 'cloning', progress: 0 }]
    if (url === '/api/credentials') return [200, { items: [] }]
    return undefined
  })
}

function name() {
  fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'helper' } })
}

describe('NewAgentPage', () => {
  it('creates an agent from an archive, showing the upload’s progress, then opens its files', async () => {
    const calls = serve()
    stubXHR()
    render(<NewAgentPage />)
    name()
    fireEvent.click(screen.getByRole('radio', { name: 'An archive or folder' }))
    fireEvent.change(screen.getByLabelText('Archive file'), { target: { files: [new File(['x'.repeat(1000)], 'app.tar')] } })
    fireEvent.click(screen.getByRole('button', { name: 'Create agent' }))
    await waitFor(() => expect(FakeXHR.last).toBeDefined())
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.url)).toEqual(['/api/agents'])
    expect([FakeXHR.last!.url, FakeXHR.last!.headers['Content-Type']]).toEqual(['/api/agents/agt_9/workspace/import', 'application/x-tar'])
    FakeXHR.last!.progress(400, 1000)
    await waitFor(() => expect((screen.getByRole('progressbar', { name: 'Upload progress' }) as HTMLProgressElement).value).toBe(40))
    FakeXHR.last!.answer(200, { files: 1, bytes: 1000 })
    await waitFor(() => expect(window.location.pathname + window.location.search).toBe('/agents/agt_9?tab=files'))
  })

  it('says the agent exists when its import is refused, in the server’s words', async () => {
    serve()
    stubXHR()
    render(<NewAgentPage />)
    name()
    fireEvent.click(screen.getByRole('radio', { name: 'An archive or folder' }))
    fireEvent.change(screen.getByLabelText('Archive file'), { target: { files: [new File(['PK'], 'app.zip')] } })
    fireEvent.click(screen.getByRole('button', { name: 'Create agent' }))
    await waitFor(() => expect(FakeXHR.last).toBeDefined())
    const words = 'The entry app/../../x leaves the workspace.'
    FakeXHR.last!.answer(400, { error: { code: 'invalid_input', message: words } })
    expect((await screen.findByRole('alert')).textContent).toBe(words)
    expect(screen.getByText(/was created, but the import was refused and nothing was written/)).toBeTruthy()
    expect(screen.getByRole('link', { name: 'Open the agent' }).getAttribute('href')).toBe('/agents/agt_9?tab=files')
    expect(screen.queryByRole('button', { name: 'Create agent' })).toBeNull()
  })

  it('creates an agent from a repository and opens its repository tab', async () => {
    const calls = serve()
    render(<NewAgentPage />)
    name()
    fireEvent.click(screen.getByRole('radio', { name: 'A git repository' }))
    fireEvent.change(screen.getByLabelText('Repository URL'), { target: { value: 'https://git.example.com/app.git' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create agent' }))
    await waitFor(() => expect(window.location.pathname + window.location.search).toBe('/agents/agt_9?tab=repository'))
    expect(calls.find((c) => c.method === 'PUT')?.body).toEqual({ url: 'https://git.example.com/app.git' })
  })

  it('creates an agent with the driver chosen', async () => {
    const calls = serve()
    render(<NewAgentPage />)
    name()
    fireEvent.change(screen.getByLabelText('Driver'), { target: { value: 'claude-code' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create agent' }))
    await waitFor(() => expect(window.location.pathname).toBe('/agents/agt_9'))
    expect((calls.find((c) => c.method === 'POST')?.body as { driver?: string }).driver).toBe('claude-code')
  })

  it('creates nothing when the chosen source is not filled in', async () => {
    const calls = serve()
    render(<NewAgentPage />)
    name()
    fireEvent.click(screen.getByRole('radio', { name: 'An archive or folder' }))
    fireEvent.click(screen.getByRole('button', { name: 'Create agent' }))
    expect((await screen.findByRole('alert')).textContent).toBe('Choose or drop an archive or folder, or start from an empty workspace.')
    expect(calls.some((c) => c.method === 'POST')).toBe(false)
  })
})
