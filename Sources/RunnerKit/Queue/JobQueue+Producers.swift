import Foundation

/// What producers do: a role given only what `submit`, `submit --wait` and `status` need, and
/// submits (every job of one in one transaction, as one batch).
extension JobQueue {
    /// Gives the existing PostgreSQL role `role` what `submit`, `submit --wait` and `status`
    /// need, and nothing more: it may read the queue's tables and insert jobs (key, kind, job,
    /// file and batch only), never update or delete a row, nor insert one with a state, status,
    /// record, claims or hooks of its own. So only a watcher, holding the claim, ends a job.
    /// Run by a role that owns the tables (the watchers'); the tables are made first if missing.
    package func grant(producer role: String) throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            let exists = Self.value(try db.query("SELECT count(*) FROM pg_roles WHERE rolname = $1", [role]))
            guard exists == "1" else { throw QueueError("there is no role \(Printable.escaped(role)) in the database; create it first (CREATE ROLE … LOGIN)", usage: true) }
            let name = Self.value(try db.query("SELECT quote_ident($1)", [role])) ?? role
            let tables = try db.query(
                "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'runner' ORDER BY 1"
            ).compactMap { $0[0] }.map { "runner." + $0 }
            try db.query("REVOKE ALL ON ALL TABLES IN SCHEMA runner FROM \(name)")
            try db.query("REVOKE ALL ON ALL SEQUENCES IN SCHEMA runner FROM \(name)")
            try db.query("GRANT USAGE ON SCHEMA runner TO \(name)")
            try db.query("GRANT SELECT ON \(tables.joined(separator: ", ")) TO \(name)")
            try db.query("GRANT INSERT (key, kind, job, file, batch) ON runner.jobs TO \(name)")
            try db.query("GRANT USAGE ON SEQUENCE runner.jobs_id_seq TO \(name)")
        }
    }

    /// A new batch's id: when it was made and a random part, `20261126-041503-8f3a`.
    package static func newBatchID(now: Date = Date()) -> String {
        var time = time_t(now.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(
            format: "%04d%02d%02d-%02d%02d%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        return stamp + "-" + String(format: "%04x", UInt16.random(in: 0...UInt16.max))
    }

    /// Inserts every job in one transaction, or none, as one batch, and wakes the idle runners.
    /// A unique job whose key is queued or running (or came earlier in the same submit) is not
    /// inserted; the answer names them, and the jobs that hold their keys.
    @discardableResult
    package func submit(_ jobs: [QueueSubmission], batch: String? = nil) throws(QueueError) -> QueueSubmitted {
        var seen = Set<String>()
        var inserted: [QueueSubmission] = []
        var outcome = QueueSubmitted()
        for job in jobs {
            if job.unique && seen.contains(job.key) {
                outcome.leftOut.append(job)
                continue
            }
            seen.insert(job.key)
            inserted.append(job)
        }
        return try connection.transaction { db throws(QueueError) -> QueueSubmitted in
            // Two submits of one unique key at once: one inserts it, the other sees it.
            if inserted.contains(where: \.unique) { try db.query("SELECT pg_advisory_xact_lock(74170002)") }
            var start = 0
            while start < inserted.count {
                let chunk = inserted[start..<min(inserted.count, start + 1000)]
                let refused = try db.query(
                    """
                    WITH given AS (
                        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $6::bool[])
                            WITH ORDINALITY AS g(key, kind, job, file, uniq, ordinality)),
                    put AS (
                        INSERT INTO runner.jobs (key, kind, job, file, batch)
                        SELECT key, kind, job, file, $5 FROM given
                        WHERE NOT (uniq AND EXISTS (SELECT 1 FROM runner.jobs j WHERE j.key = given.key AND j.state IN ('queued', 'running', 'waiting')))
                        RETURNING 1)
                    SELECT ordinality - 1 FROM given
                    WHERE uniq AND EXISTS (SELECT 1 FROM runner.jobs j WHERE j.key = given.key AND j.state IN ('queued', 'running', 'waiting'))
                    """,
                    [Self.array(chunk.map(\.key)), Self.array(chunk.map(\.kind)), Self.array(chunk.map(\.job)), Self.array(chunk.map(\.file)),
                     batch, "{" + chunk.map { $0.unique ? "t" : "f" }.joined(separator: ",") + "}"])
                let indices = refused.compactMap { $0[0].flatMap { Int($0) } }
                outcome.leftOut += indices.map { chunk[chunk.startIndex + $0] }
                start += chunk.count
            }
            if inserted.count >= Self.analyzeAfter {
                // Fresh statistics before the claims start: on a table whose statistics still
                // say it is nearly empty, the planner sorts every waiting job for each claim
                // (the database's CPU per job three to five times), where it should walk the
                // waiting jobs' index and stop at the claim's limit. Autovacuum would get there
                // a minute later. A submitter that does not own the table skips it, silently.
                // (A parent's many children, queued by `finish`, get the same.)
                try db.query("SET LOCAL client_min_messages = error")
                try db.query("ANALYZE runner.jobs")
            }
            if !outcome.leftOut.isEmpty {
                let keys = Set(outcome.leftOut.map(\.key)).sorted()
                let batchClause = batch == nil ? "" : " AND batch IS DISTINCT FROM $2"
                outcome.holding = try db.query(
                    "SELECT id FROM runner.jobs WHERE key = ANY($1::text[]) AND state IN ('queued', 'running', 'waiting')" + batchClause,
                    batch == nil ? [Self.array(keys)] : [Self.array(keys), batch]
                ).compactMap { $0[0] }
            }
            outcome.inserted = jobs.count - outcome.leftOut.count
            try db.query("SELECT pg_notify('runner_jobs', '')")
            return outcome
        }
    }

    /// A submit of this many jobs or more brings the queue's statistics up to date.
    static let analyzeAfter = 1000
}
