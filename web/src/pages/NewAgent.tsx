// Creating an agent, and what its workspace starts from: nothing, a git
// repository (cloned by the server; the repository tab follows the clone)
// or an archive or folder uploaded from here with a progress bar. The agent
// is created first; if the clone or import is then refused, the agent stays
// and the page says so in the server's words rather than offering to create
// a second one.

import { useEffect, useState } from 'react'
import { api } from '../api'
import type { Upload } from '../archive'
import { ApiError } from '../errors'
import { ErrorText } from '../feedback'
import { ArchivePicker, importInto, UploadBar, type UploadState } from '../Import'
import { cloneRequest, RepositoryFields } from '../Repository'
import { Link, navigate } from '../router'
import type { Agent, RepositoryRequest } from '../types'
import { AgentForm } from './Settings'

export type Source = 'empty' | 'repository' | 'archive'

const sources: { id: Source; label: string }[] = [
  { id: 'empty', label: 'An empty workspace' },
  { id: 'repository', label: 'A git repository' },
  { id: 'archive', label: 'An archive or folder' },
]

export function NewAgentPage() {
  const [source, setSource] = useState<Source>('empty')
  const [repo, setRepo] = useState<RepositoryRequest>({ url: '', ref: '', credential_id: '' })
  const [chosen, setChosen] = useState<Upload | null>(null)
  const [progress, setProgress] = useState<UploadState>(null)
  const [stranded, setStranded] = useState<{ agent: Agent; what: string; error: unknown }>()

  useEffect(() => {
    document.title = 'New agent · Corral'
  }, [])

  if (stranded) {
    const to = `/agents/${encodeURIComponent(stranded.agent.id)}`
    return (
      <section>
        <h1>New agent</h1>
        <p>
          The agent <strong>{stranded.agent.name}</strong> was created, but {stranded.what}:
        </p>
        <ErrorText error={stranded.error} />
        <p>
          <Link to={`${to}?tab=${source === 'repository' ? 'repository' : 'files'}`}>Open the agent</Link> to try again there.
        </p>
      </section>
    )
  }

  return (
    <section>
      <h1>New agent</h1>
      <AgentForm
        submitLabel="Create agent"
        withBudget
        onSubmit={async (body) => {
          // Refused before anything is created: a source chosen but not filled in.
          if (source === 'repository' && repo.url.trim() === '') throw new ApiError(400, 'invalid_input', 'Enter the repository URL, or start from an empty workspace.')
          if (source === 'archive' && !chosen) throw new ApiError(400, 'invalid_input', 'Choose or drop an archive or folder, or start from an empty workspace.')
          const a = await api.createAgent(body)
          const to = `/agents/${encodeURIComponent(a.id)}`
          if (source === 'repository') {
            try {
              await api.setRepository(a.id, cloneRequest(repo))
            } catch (err) {
              setStranded({ agent: a, what: 'the clone did not start', error: err })
              return
            }
            navigate(`${to}?tab=repository`)
            return
          }
          if (source === 'archive' && chosen) {
            try {
              await importInto(a.id, chosen, setProgress)
            } catch (err) {
              setStranded({ agent: a, what: 'the import was refused and nothing was written', error: err })
              return
            } finally {
              setProgress(null)
            }
            navigate(`${to}?tab=files`)
            return
          }
          navigate(to)
        }}
      >
        <fieldset>
          <legend>Workspace</legend>
          <div className="row" role="radiogroup" aria-label="Start the workspace from">
            {sources.map((s) => (
              <label key={s.id} className="choice">
                <input type="radio" name="source" value={s.id} checked={source === s.id} onChange={() => setSource(s.id)} /> {s.label}
              </label>
            ))}
          </div>
          {source === 'repository' && <RepositoryFields value={repo} onChange={setRepo} />}
          {source === 'archive' && <ArchivePicker chosen={chosen} onChoose={setChosen} />}
          <UploadBar state={progress} />
        </fieldset>
      </AgentForm>
    </section>
  )
}
