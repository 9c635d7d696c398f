package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"corral"
	"corral/internal/access"
	"corral/internal/keylock"
	"corral/internal/sanitize"
	"corral/internal/trace"
)

// SecretSource opens the credential a clone or push of an agent uses: the
// agent's owner's (service.Credentials.WithSecret). The secret is valid
// only during fn.
type SecretSource interface {
	WithSecret(ctx context.Context, agentID, credentialID, repoURL string, fn func(username string, secret []byte) error) error
}

// RepositoryStore is what the repository use cases need from storage.
type RepositoryStore interface {
	corral.RepositoryStore
	Run(ctx context.Context, id string) (corral.Run, error)
	Runs(ctx context.Context, agentID string, limit int) ([]corral.Run, error)
	// Messages pages an agent's thread (corral.MessageStore): a commit
	// says what its run was asked and answered.
	Messages(ctx context.Context, agentID, before string, limit int) ([]corral.Message, error)
}

// RepositoryConfig turns on git repositories.
type RepositoryConfig struct {
	Store   RepositoryStore
	Secrets SecretSource // nil: anonymous clones only, and no push with a credential
	// Trace keeps each agent's chain of clones and pushes (the runs'
	// trace store; an agent's chain is named by its id). Required.
	Trace trace.Store
}

// repositories is the state of the repository use cases: the clone jobs
// in flight (so a shutdown can stop and wait for them) and their progress.
type repositories struct {
	cfg    RepositoryConfig
	ctx    context.Context // cancelled by CloseRepositories: stops every clone
	cancel context.CancelFunc
	jobs   sync.WaitGroup

	rec      *trace.Recorder
	mu       sync.Mutex
	progress map[string]int // by agent, while cloning
}

// Repository is an agent's repository as the API shows it.
type Repository struct {
	corral.Repository
	Progress        int    // percent done while cloning
	SuggestedBranch string // where a push that names no branch goes (SuggestedBranch)
}

// Pushed is what a push did, and where a person opens a pull request of
// it ("" when the host's URLs are not known: PullRequestURL).
type Pushed struct {
	corral.PushResult
	PullRequestURL string
}

// RepoCommit is one commit of a repository's history.
type RepoCommit struct {
	SHA         string
	Author      corral.Identity
	CommittedAt time.Time
	Message     string
	ChangeSetID string // the change set the commit applied, "" for others
}

// Messages a person reads about a repository.
const (
	msgStoppedDuringClone = "the server stopped during the clone"
	maxCommitsListed      = 100
)

// Repositories are an agent's git repository: clone, commits, push, and
// the commit of every applied change set and upload. They hold the lock
// of each agent's workspace writes at this level (lock): a decision's
// apply and its commit, or a clone, are one step.
type Repositories struct {
	store ChangeStore
	trees corral.Trees
	cfg   Config
	locks keylock.Map
	repos *repositories // nil: no git repositories
}

// NewRepositories returns the repository use cases over the node's
// trees; with cfg nil there are none (each answers unavailable).
func NewRepositories(store ChangeStore, trees corral.Trees, cfg *RepositoryConfig, c Config) *Repositories {
	c.defaults()
	r := &Repositories{store: store, trees: trees, cfg: c}
	if cfg != nil {
		r.repos = newRepositories(*cfg, c.Now)
	}
	return r
}

// lock takes the agent's lock of workspace writes; the func releases it.
func (c *Repositories) lock(agentID string) func() { return c.locks.Lock(agentID) }

func newRepositories(cfg RepositoryConfig, now func() time.Time) *repositories {
	ctx, cancel := context.WithCancel(context.Background())
	return &repositories{cfg: cfg, ctx: ctx, cancel: cancel, rec: trace.NewRecorder(cfg.Trace, now), progress: map[string]int{}}
}

// Close stops every clone in flight and waits for the jobs to
// record it (each removes what it cloned). The server's shutdown calls it.
func (c *Repositories) Close() {
	if c.repos == nil {
		return
	}
	c.repos.cancel()
	c.repos.jobs.Wait()
}

// Reconcile runs at start-up: a clone the last process left
// cloning is failed (no job survives the process) and its partial
// directory removed (by the node, when it starts).
func (c *Repositories) Reconcile(ctx context.Context) (int, error) {
	if c.repos == nil {
		return 0, nil
	}
	ids, err := c.repos.cfg.Store.FailCloning(ctx, msgStoppedDuringClone, c.cfg.Now().UTC())
	if err != nil {
		return 0, err
	}
	// What the clone left on disk went when the node started.
	return len(ids), nil
}

func (c *Repositories) reposOn() (*repositories, error) {
	if c.repos == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "git repositories are not enabled on this server")
	}
	return c.repos, nil
}

// Clone starts cloning rawURL (optionally at ref, a branch or tag) into
// the agent's persistent workspace, which must be empty: it answers at
// once, with the repository cloning; GET shows how it goes. The
// credential is the owner's: credentialID must be one of the owner's and
// allow the URL (403 otherwise); without one, the clone is anonymous.
func (c *Repositories) Clone(ctx context.Context, actor corral.User, agentID, rawURL, ref, credentialID string) (Repository, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.WriteFiles)
	if err != nil {
		return Repository{}, err
	}
	repos, err := c.reposOn()
	if err != nil {
		return Repository{}, err
	}
	u, err := sanitize.RepositoryURL(rawURL)
	if err != nil {
		return Repository{}, err
	}
	if credentialID != "" {
		if err := sanitize.ID("credential", credentialID); err != nil {
			return Repository{}, err
		}
		// Found now, so a wrong id, or a repository the credential does
		// not allow, is an answer to this request (404, 403), not a failed
		// clone later. The secret is opened and dropped unused.
		err := c.withAuth(ctx, a.ID, credentialID, u.String(), func(*corral.GitAuth) error { return nil })
		if err != nil {
			return Repository{}, err
		}
	}
	// One clone decision at a time per agent: the check and the row.
	unlock := c.locks.Lock(a.ID)
	var r corral.Repository
	err = c.trees.CanClone(ctx, a.ID)
	if err == nil {
		r = corral.Repository{AgentID: a.ID, URL: u.String(), Ref: ref, CredentialID: credentialID,
			Status: corral.RepoCloning, CreatedBy: actor.ID, CreatedAt: c.cfg.Now().UTC()}
		if ref != "" {
			err = sanitize.RefName(ref)
		}
		if err == nil {
			err = repos.cfg.Store.CreateRepository(ctx, r)
		}
		if err == nil {
			repos.mu.Lock()
			repos.progress[a.ID] = 0
			repos.mu.Unlock()
			repos.jobs.Add(1)
		}
	}
	unlock()
	if err != nil {
		return Repository{}, err
	}
	c.cfg.Log.Info("clone started", "agent", a.ID, "by", actor.ID, "host", u.Host)
	// The answer is the clone as it starts: read before its job runs,
	// which may end it at once (a refused address).
	started, err := c.Repository(ctx, actor, a.ID)
	go c.cloneJob(r)
	return started, err
}

// cloneJob clones in the background; the node lands all of the clone in
// the workspace or nothing of it.
func (c *Repositories) cloneJob(r corral.Repository) {
	repos := c.repos
	defer repos.jobs.Done()
	ctx := repos.ctx
	var res corral.CloneResult
	err := c.withAuth(ctx, r.AgentID, r.CredentialID, r.URL, func(a *corral.GitAuth) error {
		var err error
		res, err = c.trees.Clone(ctx, r.AgentID, corral.CloneSpec{URL: r.URL, Ref: r.Ref, Auth: a}, func(p int) {
			repos.mu.Lock()
			repos.progress[r.AgentID] = p
			repos.mu.Unlock()
		})
		return err
	})
	// The outcome is recorded even when the server is stopping.
	rec := context.WithoutCancel(ctx)
	if err != nil {
		r.Status, r.Error = corral.RepoFailed, corral.ErrorMessage(err)
		if ctx.Err() != nil {
			r.Error = msgStoppedDuringClone
		}
		c.cfg.Log.Warn("clone failed", "agent", r.AgentID, "err", err)
		c.traceAgent(rec, r.AgentID, trace.CloneFailed, map[string]any{"url": r.URL, "ref": r.Ref, "error": r.Error})
	} else {
		r.Status, r.Head = corral.RepoReady, res.Head
		if r.Ref == "" {
			r.Ref = res.Branch
		}
		c.cfg.Log.Info("clone ready", "agent", r.AgentID, "head", r.Head)
		c.traceAgent(rec, r.AgentID, trace.Cloned, map[string]any{"url": r.URL, "ref": r.Ref, "head": r.Head, "by": r.CreatedBy})
	}
	r.UpdatedAt = c.cfg.Now().UTC()
	if uerr := repos.cfg.Store.UpdateRepository(rec, r); uerr != nil {
		c.cfg.Log.Error("recording a clone's outcome", "agent", r.AgentID, "err", uerr)
	}
	repos.mu.Lock()
	delete(repos.progress, r.AgentID)
	repos.mu.Unlock()
}

// withAuth runs fn with credential credentialID of the agent's owner for
// the repository at repoURL, or anonymously when credentialID is "": a
// repository set without a credential is cloned and pushed without one,
// never with one picked by its host.
func (c *Repositories) withAuth(ctx context.Context, agentID, credentialID, repoURL string, fn func(*corral.GitAuth) error) error {
	if credentialID == "" {
		return fn(nil)
	}
	src := c.repos.cfg.Secrets
	if src == nil {
		return corral.Errorf(corral.EUNAVAIL, "credentials are not enabled on this server")
	}
	return src.WithSecret(ctx, agentID, credentialID, repoURL, func(username string, secret []byte) error {
		return fn(&corral.GitAuth{Username: username, Secret: secret})
	})
}

// Repository returns the agent's repository: ENOTFOUND when it has none.
func (c *Repositories) Repository(ctx context.Context, actor corral.User, agentID string) (Repository, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.ViewAgent)
	if err != nil {
		return Repository{}, err
	}
	repos, err := c.reposOn()
	if err != nil {
		return Repository{}, err
	}
	r, err := repos.cfg.Store.Repository(ctx, a.ID)
	if err != nil {
		return Repository{}, err
	}
	out := Repository{Repository: r, SuggestedBranch: SuggestedBranch(a.ID, a.Name)}
	if r.Status == corral.RepoCloning {
		repos.mu.Lock()
		out.Progress = repos.progress[a.ID]
		repos.mu.Unlock()
	} else if r.Status == corral.RepoReady {
		out.Progress = 100
	}
	return out, nil
}

// Commits lists the newest commits of the agent's repository (at most
// 100), each with the change set it applied.
func (c *Repositories) Commits(ctx context.Context, actor corral.User, agentID string) ([]RepoCommit, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.ViewChanges)
	if err != nil {
		return nil, err
	}
	repos, err := c.reposOn()
	if err != nil {
		return nil, err
	}
	r, err := repos.cfg.Store.Repository(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	if r.Status != corral.RepoReady {
		return []RepoCommit{}, nil
	}
	log, err := c.trees.Log(ctx, a.ID, maxCommitsListed)
	if err != nil {
		return nil, err
	}
	out := make([]RepoCommit, 0, len(log))
	for _, cm := range log {
		out = append(out, RepoCommit{SHA: cm.SHA, Author: corral.Identity{Name: cm.Author.Name, Email: cm.Author.Email},
			CommittedAt: cm.CommittedAt, Message: cm.Message, ChangeSetID: cm.Trailer("Corral-Change-Set")})
	}
	return out, nil
}

// Push pushes the repository's HEAD to branch on its remote (the
// agent's suggested branch when branch is ""), a fast-forward only, with
// the owner's credential (opened only inside this call). ECONFLICT,
// naming the remote's head, when the remote moved. The answer links to
// where a pull request of the branch into the tracked ref is opened, on
// a host whose URLs are known.
func (c *Repositories) Push(ctx context.Context, actor corral.User, agentID, branch string) (Pushed, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.WriteFiles)
	if err != nil {
		return Pushed{}, err
	}
	repos, err := c.reposOn()
	if err != nil {
		return Pushed{}, err
	}
	if branch == "" {
		branch = SuggestedBranch(a.ID, a.Name)
	}
	if err := sanitize.Branch(branch); err != nil {
		return Pushed{}, err
	}
	r, err := repos.cfg.Store.Repository(ctx, a.ID)
	if err != nil {
		return Pushed{}, err
	}
	if r.Status != corral.RepoReady {
		return Pushed{}, corral.Errorf(corral.ECONFLICT, "the repository is %s, not ready", r.Status)
	}
	var res corral.PushResult
	// Only ever to the agent's own repository, with the credential it was
	// set with, if that still allows it.
	err = c.withAuth(ctx, a.ID, r.CredentialID, r.URL, func(auth *corral.GitAuth) error {
		var err error
		res, err = c.trees.Push(ctx, a.ID, r.URL, branch, auth)
		return err
	})
	if err != nil {
		c.cfg.Log.Info("push refused", "agent", a.ID, "branch", branch, "by", actor.ID, "code", corral.ErrorCode(err), "err", err)
		// The trace keeps what the person was told, never git's own words.
		c.traceAgent(ctx, a.ID, trace.PushRefused, map[string]any{"branch": branch, "by": actor.ID, "code": corral.ErrorCode(err), "error": corral.ErrorMessage(err)})
		return Pushed{}, err
	}
	c.cfg.Log.Info("pushed", "agent", a.ID, "branch", res.Branch, "head", res.Head, "commits", res.Commits, "by", actor.ID)
	c.traceAgent(ctx, a.ID, trace.Pushed, map[string]any{"branch": res.Branch, "head": res.Head, "commits": res.Commits, "by": actor.ID})
	// The row is read again: a commit may have moved its head meanwhile.
	if cur, err := repos.cfg.Store.Repository(ctx, a.ID); err == nil {
		cur.LastPush = &corral.Push{Branch: res.Branch, Head: res.Head, At: c.cfg.Now().UTC(), By: corral.UserRef{ID: actor.ID, Name: actor.Name}}
		cur.UpdatedAt = c.cfg.Now().UTC()
		if err := repos.cfg.Store.UpdateRepository(ctx, cur); err != nil {
			c.cfg.Log.Warn("recording a push", "agent", a.ID, "err", err)
		}
	}
	return Pushed{PushResult: res, PullRequestURL: PullRequestURL(r.URL, r.Ref, res.Branch)}, nil
}

// traceAgent appends an event to the agent's own chain. A failure is
// logged: the clone or push it records has happened either way.
func (c *Repositories) traceAgent(ctx context.Context, agentID, typ string, data map[string]any) {
	if _, err := c.repos.rec.Append(context.WithoutCancel(ctx), agentID, typ, data); err != nil {
		c.cfg.Log.Error("tracing on the agent", "agent", agentID, "type", typ, "err", err)
	}
}

// AgentTrace returns the agent's own chain: its clones and pushes.
func (c *Repositories) AgentTrace(ctx context.Context, actor corral.User, agentID string) ([]trace.Event, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.ViewAgent)
	if err != nil {
		return nil, err
	}
	repos, err := c.reposOn()
	if err != nil {
		return nil, err
	}
	return repos.cfg.Trace.Trace(ctx, a.ID)
}

// autoApprover approves what an agent in auto mode applied itself.
const autoApprover = "Corral (auto mode)"

// repository is the agent's repository when it is ready for commits;
// nil otherwise (no repositories, none cloned, or not ready).
func (c *Repositories) repository(ctx context.Context, agentID string) *corral.Repository {
	if c.repos == nil {
		return nil
	}
	r, err := c.repos.cfg.Store.Repository(ctx, agentID)
	if err != nil || r.Status != corral.RepoReady {
		return nil
	}
	return &r
}

// commitSpec is the commit of a write to the agent's repository r, as who.
// Secret files (.env and the like) are never committed: a push would carry
// them off the machine. What an earlier commit could not include comes
// along.
func (c *Repositories) commitSpec(ctx context.Context, r *corral.Repository, who corral.Identity, message string) *corral.CommitSpec {
	spec := &corral.CommitSpec{Author: corral.Identity{Name: oneLine(who.Name), Email: oneLine(who.Email)}, Message: message, Paths: r.Pending}
	if a, err := c.store.Agent(ctx, r.AgentID, ""); err == nil {
		spec.Secrets = a.Policy.Secrets
	}
	return spec
}

// changeSetCommit is the commit of the entries of an applied change set,
// with a ready repository: author the person who sent the message that
// started the run, Approved-By the person who approved it (or Corral in
// auto mode); its message says what was asked, what the agent answered
// and which files changed (changeSetMessage).
func (c *Repositories) changeSetCommit(ctx context.Context, cs *corral.ChangeSet, entries []corral.ChangeEntry) (*corral.CommitSpec, *corral.Repository) {
	// Not the request's context: the files are applied whether or not the
	// caller is still there, and the commit belongs with them.
	ctx = context.WithoutCancel(ctx)
	r := c.repository(ctx, cs.AgentID)
	if r == nil {
		return nil, nil
	}
	st := c.repos.cfg.Store
	var author corral.Identity // Corral's, when nobody is
	msg := changeSetMessage{RunID: cs.RunID, ChangeSetID: cs.ID, ApprovedBy: autoApprover, Entries: entries}
	if cs.RunID != "" {
		if run, err := st.Run(ctx, cs.RunID); err == nil {
			if run.TriggeredBy != nil {
				if id, err := st.Identity(ctx, run.TriggeredBy.ID); err == nil {
					author = id
				}
			}
			msg.Request, msg.Answer = c.runTexts(ctx, run)
		}
	}
	if cs.DecidedBy != nil {
		msg.ApprovedBy = oneLine(cs.DecidedBy.Name)
		if id, err := st.Identity(ctx, cs.DecidedBy.ID); err == nil {
			msg.ApprovedBy = fmt.Sprintf("%s <%s>", oneLine(id.Name), oneLine(id.Email))
		}
	}
	return c.commitSpec(ctx, r, author, msg.String()), r
}

// uploadCommit is the commit of an upload, import or delete by actor,
// with a ready repository.
func (c *Repositories) uploadCommit(ctx context.Context, actor corral.User, a corral.Agent, message string) (*corral.CommitSpec, *corral.Repository) {
	ctx = context.WithoutCancel(ctx)
	r := c.repository(ctx, a.ID)
	if r == nil {
		return nil, nil
	}
	who := corral.Identity{Name: actor.Name, Email: actor.Email}
	if id, err := c.repos.cfg.Store.Identity(ctx, actor.ID); err == nil {
		who = id
	}
	return c.commitSpec(ctx, r, who, message), r
}

// recordCommit keeps how a commit of repository r went: its head, or what
// the next commit must include after a failure (the files are written
// either way).
func (c *Repositories) recordCommit(ctx context.Context, r *corral.Repository, res corral.CommitResult) {
	if r == nil || !res.Made {
		return
	}
	if res.Failed {
		r.Error = "the last commit failed (the files are applied; the next commit includes them)"
		r.Pending = res.Paths
	} else {
		r.Error, r.Pending = "", nil
		if res.SHA != "" {
			r.Head = res.SHA
		}
	}
	r.UpdatedAt = c.cfg.Now().UTC()
	if err := c.repos.cfg.Store.UpdateRepository(context.WithoutCancel(ctx), *r); err != nil {
		c.cfg.Log.Warn("recording a commit", "agent", r.AgentID, "err", err)
	}
}

// oneLine keeps a name on one line of a commit (a trailer, an identity).
func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' || r == 0 || r == '<' || r == '>' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
