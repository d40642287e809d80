/// What ends a claim: the job's record stored (`finish`), its hooks ended, the claim given
/// back unstarted (`release`); durable progress credited to a running claim; how the jobs of
/// a submitted file ended.
extension JobQueue {
    /// Credits the running jobs `ids` of `runner` with one claim each: their claim made durable
    /// progress (a partial grew and was synced), so it will not count as an abandon if the
    /// runner dies. Once per claim.
    package func credit(ids: [Int64], runner: String) throws(QueueError) {
        guard !ids.isEmpty else { return }
        try connection.query(
            """
            UPDATE runner.jobs SET credits = credits + 1, credited_claim = claims
            WHERE id = ANY($1::bigint[]) AND runner = $2 AND state = 'running' AND status IS NULL AND credited_claim <> claims
            """, [Self.array(ids), runner])
    }

    /// Stores the records of finished jobs and ends their claims (those `runner` still holds),
    /// and lets go of `keys` of `runner`, in one statement; when a queued job waits for one of
    /// those keys, the runners are told as of new jobs.
    /// Returns the parents whose last child ended with these: each is now this runner's to
    /// complete (`completeParent`). A job with children waits for them; its children are
    /// queued in the same statement (and the runners told).
    @discardableResult
    package func finish(_ jobs: [QueueFinish], runner: String, unlocking keys: [String] = []) throws(QueueError) -> [Int64] {
        guard !jobs.isEmpty else {
            try unlockKeys(keys, runner: runner)
            return []
        }
        var children: [(key: String, kind: String, job: String, parent: Int64)] = []
        for job in jobs { children += job.children.jobs.map { ($0.key, $0.kind, $0.job, job.id) } }
        let rows = try connection.query(
            """
            WITH unlocked AS (DELETE FROM runner.keys WHERE key = ANY($6::text[]) AND runner = $5 RETURNING key),
            done AS (
                UPDATE runner.jobs j SET status = f.status, reason = f.reason, record = f.record, finished_at = now(),
                    state = CASE WHEN f.waits > 0 THEN 'waiting' WHEN f.pending THEN 'running' ELSE 'done' END,
                    lease_until = CASE WHEN f.pending AND f.waits = 0 THEN now() + $9::interval END,
                    runner = CASE WHEN f.waits > 0 THEN NULL ELSE j.runner END,
                    phase = CASE WHEN f.waits > 0 THEN 'children' END,
                    children_total = CASE WHEN f.waits > 0 THEN f.waits + f.invalid END,
                    children_invalid = CASE WHEN f.waits > 0 THEN f.invalid END, first_invalid = CASE WHEN f.waits > 0 THEN f.first_invalid END
                FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $7::bool[], $8::bool[], $10::int[], $11::int[], $12::text[])
                    AS f(id, status, reason, record, kept, pending, waits, invalid, first_invalid)
                WHERE j.id = f.id AND j.runner = $5 AND j.state = 'running' AND j.status IS NULL
                RETURNING j.key, f.record, f.kept AND f.waits = 0 AS kept, j.id, j.parent_id, j.file, j.batch, f.waits, j.kind, j.status),
            kept AS (
                INSERT INTO runner.results AS r (key, record)
                SELECT DISTINCT ON (key) key, record FROM done WHERE kept ORDER BY key, id DESC
                ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record, finished_at = now()),
            counting AS (INSERT INTO runner.parents (id, children_left) SELECT id, waits FROM done WHERE waits > 0),
            children AS (
                INSERT INTO runner.jobs (key, kind, job, file, batch, parent_id)
                SELECT c.key, c.kind, c.job, d.file, d.batch, c.parent
                FROM unnest($13::text[], $14::text[], $15::text[], $16::bigint[]) AS c(key, kind, job, parent)
                JOIN done d ON d.id = c.parent
                RETURNING 1),
            \(Self.parentsOfDone(runner: "$5", lease: "$9")),
            \(Self.toldTheFleet(runner: "$5"))
            SELECT (SELECT count(*) FROM woken) + (SELECT count(*) FROM told), (SELECT count(*) FROM children),
                (SELECT string_agg(id::text, ' ') FROM completing)
            """,
            [Self.array(jobs.map(\.id)), Self.array(jobs.map(\.status)),
             Self.array(jobs.map(\.error)), Self.array(jobs.map(\.record)), runner, Self.array(keys),
             Self.flags(jobs.map { $0.isKeyRecord && $0.status != JobStatus.duplicate.rawValue }), Self.flags(jobs.map(\.hooksPending)),
             leaseText, Self.numbers(jobs.map(\.children.jobs.count)), Self.numbers(jobs.map(\.children.invalid)),
             Self.array(jobs.map(\.children.firstInvalid)),
             Self.array(children.map(\.key)), Self.array(children.map(\.kind)), Self.array(children.map(\.job)), Self.array(children.map(\.parent))])
        if children.count >= Self.analyzeAfter { try refreshStatistics() }
        return Self.ids(rows.first.flatMap { $0.count > 2 ? $0[2] : nil })
    }

    /// Brings the planner's statistics of the jobs up to date after many rows came at once (a
    /// submit, a parent's children), as `submit` explains; quietly skipped by a role that does
    /// not own the table.
    private func refreshStatistics() throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            try db.query("SET LOCAL client_min_messages = error")
            try db.query("ANALYZE runner.jobs")
        }
    }

    /// The end of a statement whose `done` ended jobs (`key`, `kind`, `status`; a parent that
    /// now waits for its children, `waits` > 0, has not): each is told
    /// on `runner_events` (what a live page's event stream shows of the fleet), when a watcher
    /// that follows them is alive.
    static func toldTheFleet(runner: String) -> String {
        """
        told AS (
            SELECT pg_notify('runner_events', json_build_object(
                'event', 'finished', 'key', d.key, 'kind', d.kind, 'status', d.status, 'runner', \(runner))::text)
            FROM done d
            WHERE d.waits = 0 AND EXISTS (SELECT 1 FROM runner.watchers w WHERE w.events AND w.heartbeat_at > now() - make_interval(secs => w.lease_ms / 1000.0)))
        """
    }

    /// How the jobs of the submitted file of job `id` (its file in its batch, children
    /// included) ended, by status, once none is left to run (queued, running its own job, or a
    /// parent waiting for its children); nil while some are. A watcher asks each time it ends
    /// the last job it holds of a file, so the common answer, "some are left", comes from the
    /// index of the jobs left to run (`jobs_file_open`), and the count, once, from the index of
    /// the file's jobs (`jobs_file`): neither walks the batch or the table.
    package func fileOutcome(of id: Int64) throws(QueueError) -> [String: Int]? {
        let rows = try connection.query(
            """
            WITH f AS (SELECT file, batch FROM runner.jobs WHERE id = $1),
            left_to_run AS (
                SELECT EXISTS (SELECT 1 FROM runner.jobs j, f WHERE j.batch = f.batch AND j.file = f.file AND \(Self.leftToRun))
                OR EXISTS (
                    SELECT 1 FROM runner.jobs j, f WHERE f.batch IS NULL AND j.batch IS NULL AND j.file = f.file AND \(Self.leftToRun))
                AS any_left)
            SELECT '', 1 WHERE (SELECT any_left FROM left_to_run)
            UNION ALL
            SELECT status, count(*) FROM (
                SELECT j.status FROM runner.jobs j, f WHERE j.batch = f.batch AND j.file = f.file
                UNION ALL
                SELECT j.status FROM runner.jobs j, f WHERE f.batch IS NULL AND j.batch IS NULL AND j.file = f.file) ended
            WHERE NOT (SELECT any_left FROM left_to_run)
            GROUP BY 1
            """, [String(id)])
        var counts: [String: Int] = [:]
        for row in rows {
            let status = row[0] ?? ""
            if status.isEmpty { return nil }
            counts[status, default: 0] += Int(row[1] ?? "0") ?? 0
        }
        return counts
    }

    /// Ends the jobs whose records `finish` stored with their hooks pending, once the hooks ran
    /// (those `runner` still holds).
    package func hooksEnded(ids: [Int64], runner: String) throws(QueueError) {
        guard !ids.isEmpty else { return }
        try connection.query(
            """
            UPDATE runner.jobs SET state = 'done', lease_until = NULL
            WHERE id = ANY($1::bigint[]) AND runner = $2 AND state = 'running' AND status IS NOT NULL
            """, [Self.array(ids), runner])
    }

    /// Gives claims back at once (a runner stopping before it started them).
    package func release(ids: [Int64], runner: String) throws(QueueError) {
        guard !ids.isEmpty else { return }
        try connection.query(
            """
            UPDATE runner.jobs SET state = 'queued', runner = NULL, lease_until = NULL, started_at = NULL, claims = greatest(0, claims - 1)
            WHERE id = ANY($1::bigint[]) AND runner = $2 AND state = 'running' AND status IS NULL
            """, [Self.array(ids), runner])
        try connection.query("SELECT pg_notify('runner_jobs', '')")
    }
}
