package mock

import "github.com/tollgate/tollgate/app/ledger/providerlog"

// The mock's log is in the provider-log format reconcile reads; the names
// stay here for the mock's callers.
type (
	Record = providerlog.Record
	Usage  = providerlog.Usage
)
