// The files tab: the persistent workspace as the server lists it, dotfiles
// and dot-folders included (`.gitignore` and `.github/` are ordinary
// files); a download of the whole workspace for anyone who can see it;
// delete (with a confirm) and import for editors and owners.

import { api } from './api'
import { ConfirmDelete } from './ConfirmDelete'
import { isNotFound } from './errors'
import { ErrorText, Loading, useLoad } from './feedback'
import { formatBytes } from './format'
import { ImportPanel } from './Import'
import { Link, navigate } from './router'
import type { Agent } from './types'

/** A Delete button for a file or a folder of the workspace. */
function DeleteButton({ agentId, path, isDir, onDeleted }: { agentId: string; path: string; isDir: boolean; onDeleted: () => void }) {
  return (
    <ConfirmDelete
      name={path}
      question={isDir ? `Delete the folder ${path} and everything in it?` : `Delete ${path}?`}
      remove={() => api.deleteFile(agentId, path, isDir)}
      onDeleted={onDeleted}
    />
  )
}

export function FileBrowser({ agent, path }: { agent: Agent; path: string }) {
  const agentId = agent.id
  const file = useLoad(() => api.files(agentId, path), [agentId, path])
  const base = `/agents/${encodeURIComponent(agentId)}?tab=files`
  const to = (p: string) => (p === '' ? base : `${base}&path=${encodeURIComponent(p)}`)
  const parts = path.split('/').filter(Boolean)
  const emptyRoot = path === '' && isNotFound(file.error)
  const editor = agent.can.includes('write_files')

  return (
    <section aria-labelledby="files-heading">
      <div className="page-head">
        <h2 id="files-heading">Workspace files</h2>
        <a href={api.archiveURL(agentId)} download className="button secondary">
          Download workspace (.tar.gz)
        </a>
      </div>
      <nav aria-label="Folder path" className="crumbs">
        <Link to={to('')}>workspace</Link>
        {parts.map((p, i) => (
          <span key={i}>
            {' / '}
            <Link to={to(parts.slice(0, i + 1).join('/'))}>{p}</Link>
          </span>
        ))}
      </nav>
      {emptyRoot ? <p className="empty">The workspace is empty.</p> : <ErrorText error={file.error} />}
      {file.loading && !file.data && <Loading what="files" />}
      {file.data?.type === 'dir' && (
        <>
          {(file.data.entries ?? []).length === 0 ? (
            <p className="empty">{path === '' ? 'The workspace is empty.' : 'This folder is empty.'}</p>
          ) : (
            <table className="list files">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Size</th>
                  {editor && <th scope="col">Actions</th>}
                </tr>
              </thead>
              <tbody>
                {parts.length > 0 && (
                  <tr>
                    <td>
                      <Link to={to(parts.slice(0, -1).join('/'))}>.. (up)</Link>
                    </td>
                    <td />
                    {editor && <td />}
                  </tr>
                )}
                {(file.data.entries ?? []).map((e) => {
                  const p = parts.concat(e.name).join('/')
                  return (
                    <tr key={e.name}>
                      <td>
                        <Link to={to(p)}>{e.type === 'dir' ? `${e.name}/` : e.name}</Link>
                      </td>
                      <td>{e.type === 'dir' ? '—' : formatBytes(e.size)}</td>
                      {editor && (
                        <td>
                          <DeleteButton agentId={agentId} path={p} isDir={e.type === 'dir'} onDeleted={() => void file.reload()} />
                        </td>
                      )}
                    </tr>
                  )
                })}
              </tbody>
            </table>
          )}
        </>
      )}
      {file.data?.type === 'file' && (
        <div className="file-view">
          <h3>
            {file.data.path} <span className="muted small">{formatBytes(file.data.size)}</span>
          </h3>
          {editor && (
            <DeleteButton agentId={agentId} path={file.data.path} isDir={false} onDeleted={() => navigate(to(parts.slice(0, -1).join('/')))} />
          )}
          {file.data.content !== undefined ? (
            <pre className="file-content" aria-label={`Content of ${file.data.path}`}>
              {file.data.content}
            </pre>
          ) : (
            <p className="muted">This is not a text file ({formatBytes(file.data.size)}); it is not shown here.</p>
          )}
        </div>
      )}
      {editor && path === '' && <ImportPanel agentId={agentId} onImported={() => void file.reload()} />}
    </section>
  )
}
