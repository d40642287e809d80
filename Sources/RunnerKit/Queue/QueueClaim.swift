/// A job a runner claimed: under a lease, its key locked for it when no runner held the key.
package struct QueueClaim: Sendable {
    package var id: Int64
    package var key: String
    package var kind: String
    package var job: String
    /// Whether the claim took the key's lock for this runner too (no runner held it).
    package var keyLocked = false
    /// The name of the file it was submitted in.
    package var file = ""
    /// The batch it was submitted in (nil: none, as a queue made before batches has): two
    /// batches of one file name are told apart by it.
    package var batch: String?
    /// Hosts the fleet holds back as the claim was made, and for how long from then: the
    /// claim's jobs wait for them even if the notice of the pause has not come yet.
    package var pauses: [(host: String, left: Duration)] = []
    /// The key's last record, whichever runner wrote it (`results`): its validators and
    /// payload path, for a conditional request and the stale fallback.
    package var previous: String?
    /// The job's own record, when it ran and only its `--on-finish` hooks are left (its
    /// runner stopped before they ended): the claim is for the hooks alone.
    package var outcome: String?
    /// With `outcome`: the job is a parent whose children all ended, and its record is to be
    /// completed with their counts (then its hooks run).
    package var completesParent = false
}
