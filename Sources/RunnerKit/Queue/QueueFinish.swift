/// One finished job, as `finish(_:runner:)` stores it.
package struct QueueFinish: Sendable {
    package var id: Int64
    package var status: String
    package var error: String?
    package var record: String
    /// Whether the record is the key's last (`results`), as its `results/` file is: false
    /// for a job that never ran as the key (one this runner could not read).
    package var isKeyRecord = true
    /// Its `--on-finish` hooks are still to run: the job stays `running` under the lease,
    /// its record stored, until `hooksEnded` (or, if this runner dies, another runner claims
    /// it for its hooks alone).
    package var hooksPending = false
    /// The job's children, queued with its record: it waits for them (its record is its own
    /// fetch's until the last of them ended; then it is completed with their counts).
    package var children = Children()

    package init(id: Int64, status: String, error: String?, record: String, isKeyRecord: Bool = true, hooksPending: Bool = false) {
        self.id = id
        self.status = status
        self.error = error
        self.record = record
        self.isKeyRecord = isKeyRecord
        self.hooksPending = hooksPending
    }

    /// A parent's children as the queue takes them: those that could be made into jobs, and
    /// how many elements could not (with the first reason).
    package struct Children: Sendable {
        package var jobs: [(key: String, kind: String, job: String)] = []
        package var invalid = 0
        package var firstInvalid: String?
        package init() {}
    }
}
