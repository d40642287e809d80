import Foundation

/// Makes a job's record from how its attempts ended and what came before: the one place where a
/// 304 carries the earlier result forward and where a failure falls back to the earlier payload.
enum ResultAssembly {
    /// The most of a kind's `details` a record keeps: 64 members, strings of 1 KiB, arrays
    /// and objects of 64 entries, 8 levels deep. A kind copies them from what the server sent
    /// (or its program said); every reader of the record, the event stream and the page needs
    /// them small.
    static func capped(_ details: [(key: String, value: JSONValue)]) -> [(key: String, value: JSONValue)] {
        guard case .object(let members) = JSONValue.object(details).capped(stringBytes: 1024, items: 64, depth: 8) else { return [] }
        return members
    }

    static func result(
        of job: JobDescriptor, report: AttemptLoop.Report, previous: PreviousResult?, startedAt: Date
    ) -> JobResult {
        var result = JobResult(
            key: job.key, kind: job.kindName, url: job.recordURL, status: .failed, attempts: report.attempts,
            waitedForNetworkMs: report.waitedForNetwork.inMilliseconds, startedAt: startedAt,
            finishedAt: startedAt, parent: job.parent)
        result.waitedForHostMs = report.waitedForHost.inMilliseconds
        if let committed = report.committed {
            result.status = committed.status
            result.httpStatus = committed.httpStatus
            result.details = Self.capped(committed.details)
            result.validators = report.validators
            if committed.status == .notModified, let previous {
                carryForward(previous, into: &result)
            } else {
                result.output = committed.output
                result.bytes = committed.bytes
                result.sha256 = committed.sha256
            }
        } else if let failure = report.failure {
            result.status = failure.status
            result.error = failure.message
            result.reason = failure.reason
            result.httpStatus = failure.httpStatus
            if failure.status.allowsStaleFallback || (failure.status == .notFound && job.keepStale), let previous {
                fallBack(to: previous, in: &result)
            }
        }
        addTransfer(report, to: &result)
        return result
    }

    /// A job that ended without a payload of its own points at the key's last good one, which
    /// stays untouched: `stale`, with that payload's path, size, hash and validators (so the
    /// next run's request is still conditional, and `prune` leaves the payload alone).
    static func fallBack(to previous: PreviousResult, in result: inout JobResult) {
        result.output = previous.output
        result.bytes = previous.bytes
        result.sha256 = previous.sha256
        result.validators = previous.validators
        result.stale = true
    }

    /// What the transfers did, when it is more than one whole body: bytes kept from before,
    /// bytes over the network, why kept bytes came again.
    private static func addTransfer(_ report: AttemptLoop.Report, to result: inout JobResult) {
        if report.committed != nil, report.resumedFrom > 0 { result.resumedFrom = report.resumedFrom }
        result.startedOver = report.startedOver
        let transferred = report.transferred
        if result.resumedFrom != nil || result.startedOver != nil
            || (transferred >= PartialDownload.threshold && transferred != result.bytes)
        {
            result.transferred = transferred
        }
    }

    /// A 304 keeps the earlier payload: its path, size, hash and details stand; details the
    /// kind found now are added where the earlier record had none of that name.
    static func carryForward(_ previous: PreviousResult, into result: inout JobResult) {
        result.output = previous.output
        result.bytes = previous.bytes
        result.sha256 = previous.sha256
        result.httpStatus = 304
        var details = previous.details
        for (key, value) in result.details where !details.contains(where: { $0.key == key }) { details.append((key, value)) }
        result.details = details
        if result.validators == nil { result.validators = previous.validators }
    }

    /// Adds the children's counts to a parent's record. The parent's status stays its own fetch's
    /// (a catalog fetched well is `succeeded` whatever its children did: their counts are in its
    /// details, the summary and the exit code), unless none of its elements could be made into a
    /// job (then its payload is no catalog) or it was cancelled while its children ran.
    static func addChildren(_ counts: ChildCounts, total: Int, cancelled: Bool, to result: inout JobResult) {
        var members: [(key: String, value: JSONValue)] = JobStatus.allCases.compactMap { status in
            counts.byStatus[status].map { (status.rawValue, JSONValue($0)) }
        }
        if counts.invalid > 0 { members.append(("invalid", JSONValue(counts.invalid))) }
        result.details.append(("children", .object(members)))
        result.descendants = counts.descendants
        result.descendants.invalid += counts.invalid
        if let reason = counts.firstInvalid { result.details.append(("invalidChild", .string(reason))) }
        guard result.status.isSuccess else { return }
        if total > 0, counts.invalid == total {
            result.status = .failed
            result.error = "none of its \(total) children could be made into jobs; the first: \(counts.firstInvalid ?? "?")"
            return
        }
        if cancelled {
            result.status = .cancelled
            result.error = "cancelled while its child jobs ran"
        }
    }
}

extension ResultAssembly {
    /// A parent's record as its own fetch left it, completed with how its children ended (by
    /// status name), as `addChildren` completes one the engine ran: the counts under
    /// `details.children`, the first element that could not be made under
    /// `details.invalidChild`, and `failed` when none of `total` elements could be made.
    static func completed(_ record: JSONValue, counts: [String: Int], invalid: Int, firstInvalid: String?, total: Int) -> JSONValue {
        guard case .object(var members) = record else { return record }
        var children: [(key: String, value: JSONValue)] = JobStatus.allCases.compactMap { status in
            counts[status.rawValue].map { (status.rawValue, JSONValue($0)) }
        }
        if invalid > 0 { children.append(("invalid", JSONValue(invalid))) }
        func set(_ name: String, _ value: JSONValue) {
            if let index = members.firstIndex(where: { $0.key == name }) { members[index].value = value } else { members.append((name, value)) }
        }
        var details = record["details"]?.objectValue ?? []
        details.removeAll { $0.key == "children" || $0.key == "invalidChild" }
        details.append(("children", .object(children)))
        if let firstInvalid { details.append(("invalidChild", .string(firstInvalid))) }
        set("details", .object(details))
        set("finishedAt", .string(Timestamp.iso8601(Date())))
        let succeeded = record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))?.isSuccess == true
        if succeeded, total > 0, invalid == total {
            set("status", .string(JobStatus.failed.rawValue))
            set("error", .string(JobResult.capped("none of its \(total) children could be made into jobs; the first: \(firstInvalid ?? "?")")))
        }
        return .object(members)
    }
}

/// The statuses of one parent's children.
struct ChildCounts: Sendable {
    var byStatus: [JobStatus: Int] = [:]
    /// Elements that could not be made into jobs.
    var invalid = 0
    var firstInvalid: String?
    /// Every job below the parent: its children and theirs.
    var descendants = JobResult.Descendants()

    mutating func add(_ child: JobResult) {
        byStatus[child.status, default: 0] += 1
        descendants.byStatus[child.status, default: 0] += 1
        descendants.add(child.descendants)
    }
}

extension JobResult {
    /// The record of a job that ended without an attempt (refused, cancelled before it started):
    /// `status` and why, nothing fetched.
    /// With `previous` (the key's last good result) and a status that falls back, it points at
    /// that payload as stale: a job cancelled before it started leaves the key's payload named.
    static func ended(_ job: JobDescriptor, _ status: JobStatus, error: String, startedAt: Date, previous: PreviousResult? = nil) -> JobResult {
        var result = JobResult(
            key: job.key, kind: job.kindName, url: job.recordURL, status: status, error: error,
            startedAt: startedAt, finishedAt: Date(), parent: job.parent)
        if status.allowsStaleFallback, let previous { ResultAssembly.fallBack(to: previous, in: &result) }
        return result
    }
}
