/// One job as submitted: its key and kind, and the job itself as JSON (`{"job", "defaults"}`).
package struct QueueSubmission: Sendable {
    package var key: String
    package var kind: String
    package var job: String
    package var file: String
    /// Not inserted while a job of its key is queued or running (`"unique": true`, `submit --unique`).
    package var unique = false

    package init(key: String, kind: String, job: String, file: String, unique: Bool = false) {
        self.key = key
        self.kind = kind
        self.job = job
        self.file = file
        self.unique = unique
    }
}

/// What a submit inserted and what it left out.
package struct QueueSubmitted: Sendable {
    /// The jobs inserted.
    package var inserted = 0
    /// The unique jobs not inserted because a job of their key was queued or running (or came
    /// earlier in the same submit).
    package var leftOut: [QueueSubmission] = []
    /// The ids of the queued or running jobs of other batches that hold the left-out keys:
    /// what a submitter that waits for its work waits for too.
    package var holding: [String] = []
}
