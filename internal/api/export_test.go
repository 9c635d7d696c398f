package api

// What the external tests (package api_test, which build the server
// through internal/app) reach of the package's insides: the views they
// decode answers into, and a few helpers. Test-only.

import "corral/internal/service"

type (
	AgentBudgetView = agentBudgetView
	AgentView       = agentView
	AuditLineView   = auditLineView
	CanView         = canView
	ChangeEntryView = changeEntryView
	ChangeSetView   = changeSetView
	CommitView      = commitView
	CredentialView  = credentialView
	DocumentView    = documentView
	ErrorBody       = errorBody
	ErrorView       = errorView
	FileView        = fileView
	GrantView       = grantView
	IdentityView    = identityView
	ImportView      = importView
	InviteView      = inviteView
	LimitsView      = limitsView
	LinkView        = linkView
	List[T any]     = list[T]
	MessageView     = messageView
	ModelView       = modelView
	ModelsView      = modelsView
	NodeView        = nodeView
	PostedMessage   = postedMessage
	PushView        = pushView
	SyncView        = syncView
	RepositoryView  = repositoryView
	RetrievalView   = retrievalView
	PresetView      = presetView
	RunInFlightView = runInFlightView
	RunView         = runView
	SecretView      = secretView
	TokenView       = tokenView
	TokensView      = tokensView
	TraceView       = traceView
	UsageView       = usageView
	UserAnswer      = userAnswer
	UserView        = userView
	WaitingView     = waitingView
)

var (
	ParseEventID = parseEventID
	ClientAddrOf = clientAddrOf
	Decode       = decode
	OpenAPIJSON  = openAPI
)

// RouteInfo is a route of the route table: method, path, and whether it
// needs sign-in.
type RouteInfo struct {
	Method, Path string
	Auth         bool
}

// Routes lists the route table.
func Routes() []RouteInfo {
	var out []RouteInfo
	for _, rt := range (&Server{}).routes() {
		out = append(out, RouteInfo{Method: rt.method, Path: rt.path, Auth: rt.auth})
	}
	return out
}

// Accounts are the server's account use cases.
func (s *Server) Accounts() *service.Accounts { return s.accounts }

// LiveStreams is how many event streams hold a slot.
func (s *Server) LiveStreams() int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return s.streams.total
}
