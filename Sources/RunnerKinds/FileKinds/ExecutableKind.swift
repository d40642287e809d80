import Foundation
import Glibc
import RunnerKit
import Synchronization

/// A job of an executable kind: a program checks the fetched payload, or does the whole
/// network operation (`fetch: false`), and answers in JSON on stdout.
struct ExecutableKind: JobParameters {
    let file: KindFile
    let parameters: FileKindParameters

    var kindName: String { file.name }
    var accept: String? { file.accept }
    /// Attempts so far of this job (the engine runs the same value for each attempt).
    private let attempts = AttemptCounter()

    /// Exit status of a transient failure (`EX_TEMPFAIL`).
    static let temporaryFailure: Int32 = 75

    init(file: KindFile, parameters: FileKindParameters) {
        self.file = file
        self.parameters = parameters
    }

    func resolveURL(_ template: String) -> String { parameters.fillURL(template) }

    func defaultKey(kind: String, url: String) -> String { parameters.key(of: file, url: url) }

    /// A kind that does its own network operation (`fetch: false`) takes any scheme with a host.
    func validateURL(_ text: String) throws(JobSpecError) -> URL {
        if file.fetch { return try JobDescriptor.validateURL(text) }
        guard let url = URL(string: text), url.scheme != nil, let host = url.host, !host.isEmpty else {
            throw JobSpecError(field: "url", "is not a valid absolute URL with a host: '\(text)'")
        }
        return url
    }

    func run(in context: JobContext) async throws -> KindOutcome {
        let attempt = attempts.next()
        let job = context.job
        let deadline = Date().addingTimeInterval(job.timeout.inSeconds)
        var response: JobContext.Response?
        if file.fetch {
            switch try await context.fetch(folder: file.folder) {
            case .fetched(let fetched): response = fetched
            case .notModified:
                // The stored payload is current: nothing new for the program to check.
                return KindOutcome(.notModified, folder: file.folder, fileExtension: file.fileExtension)
            }
        }
        let workdir = try Self.makeWorkdir()
        defer { try? FileManager.default.removeItem(atPath: workdir) }

        let headers = try context.requestHeaders().map { ($0.name, JSONValue.string($0.value)) }
        var request: [(key: String, value: JSONValue)] = [
            ("job", .object(jobObject(job))),
            ("key", .string(job.key)),
            ("url", .string(job.url.absoluteString)),
            ("headers", .object(headers)),
            ("attempt", JSONValue(attempt)),
            ("deadline", .string(Timestamp.iso8601(deadline))),
        ]
        if let response {
            request.append(("payload", .string(try response.payload.file().path)))
            request.append((
                "response",
                .object([
                    ("status", JSONValue(response.head.status)),
                    ("headers", .object(response.head.headers.map { ($0.key.lowercased(), .string($0.value)) }.sorted { $0.0 < $1.0 })),
                ])))
        }
        request.append(("workdir", .string(workdir)))

        let process: KindProcess
        do {
            process = try KindProcess(command: file.exec!, directory: file.directory)
        } catch {
            throw JobFailure.failed("the kind '\(file.name)' could not run its program: \(error.description)")
        }
        context.waiting(for: "the program \(file.exec![0]) did not answer")
        let outcome = await process.run(input: JSONWriter.data(.object(request))) { line in context.log(line) }
        if outcome.cancelled || Task.isCancelled { throw CancellationError() }
        context.waiting(for: nil)
        return try answer(outcome, response: response, workdir: workdir, job: job)
    }

    /// The job's fields as the program sees them: the common ones and the kind's parameters, defaults applied.
    private func jobObject(_ job: JobDescriptor) -> [(key: String, value: JSONValue)] {
        var fields: [(key: String, value: JSONValue)] = [
            ("kind", .string(job.kindName)), ("key", .string(job.key)), ("url", .string(job.url.absoluteString)),
            ("timeout", .number(job.timeout.inSeconds)),
            ("retries", JSONValue(job.retries)), ("maxBytes", JSONValue(job.maxBytes)),
        ]
        if let output = job.output { fields.append(("output", .string(output))) }
        fields.append(contentsOf: parameters.values)
        return fields
    }

    private func answer(_ outcome: KindProcess.Outcome, response: JobContext.Response?, workdir: String, job: JobDescriptor) throws -> KindOutcome {
        let program = file.exec![0]
        if outcome.overflowed {
            throw JobFailure.failed("the program's answer is larger than 16 MiB")
        }
        switch outcome.ending {
        case .signalled(let signal):
            throw JobFailure.failed("the program \(program) was killed by signal \(signal)" + (outcome.lastErrorLine.map { ": \($0)" } ?? ""))
        case .exited(Self.temporaryFailure):
            throw JobFailure(
                .failed, "the program \(program) reported a temporary failure (exit 75)" + (outcome.lastErrorLine.map { ": \($0)" } ?? ""),
                isTransient: true)
        case .exited(let code) where code != 0:
            throw JobFailure.failed("the program \(program) exited \(code)" + (outcome.lastErrorLine.map { ": \($0)" } ?? ""))
        case .exited:
            break
        }
        let answer: JSONValue
        do {
            answer = try JSONParser.parse(outcome.stdout)
        } catch {
            throw JobFailure.failed("the program's answer is not one JSON object: \(outcome.stdout.isEmpty ? "it wrote nothing" : "\(error)")")
        }
        guard case .object = answer else {
            throw JobFailure.failed("the program's answer is not one JSON object but \(answer.typeDescription)")
        }
        let message = answer["error"]?.stringValue
        let transient = answer["transient"] == .bool(true)
        switch answer["status"] {
        case .string("succeeded")?: break
        case .string("failed")?: throw JobFailure(.failed, message ?? "the program said the job failed", isTransient: transient)
        case .string("notFound")?: throw JobFailure(.notFound, message ?? "the program said there is nothing there")
        default: throw JobFailure.failed("the program's answer has no status \"succeeded\", \"failed\" or \"notFound\"")
        }
        var details: [(key: String, value: JSONValue)] = []
        switch answer["details"] {
        case nil, .null?: break
        case .object(let members)?: details = members.filter { $0.key != "children" }
        case let other?: throw JobFailure.failed("the program's answer has details that are \(other.typeDescription), not an object")
        }
        var children = ChildJobs()
        switch answer["children"] {
        case nil, .null?: break
        case .array(let items)?:
            children = ChildJobs(count: items.count) { index in
                guard case .object(let fields) = items[index] else {
                    return .failure(ChildJobs.Invalid("child \(index + 1) of the program's answer is \(items[index].typeDescription), not a job object"))
                }
                return .success(ChildJob(fields))
            }
        case let other?: throw JobFailure.failed("the program's answer has children that are \(other.typeDescription), not a list")
        }
        let status = response?.head.status
        let stored: KindOutcome.Stored
        if let name = answer["payload"]?.stringValue {
            stored = .bytes(try Self.readPayload(name, workdir: workdir, maxBytes: job.maxBytes), httpStatus: status)
        } else if let response {
            stored = .body(response)
        } else {
            throw JobFailure.failed("the program said succeeded but named no payload, which a kind with fetch: false must")
        }
        return KindOutcome(stored, folder: file.folder, fileExtension: file.fileExtension, details: details, children: children)
    }

    /// The bytes of the file the program names, which must lie inside its work folder.
    private static func readPayload(_ name: String, workdir: String, maxBytes: Int) throws -> [UInt8] {
        let path = name.hasPrefix("/") ? name : "\(workdir)/\(name)"
        guard let real = realpath(path, nil) else {
            throw JobFailure.failed("the program's payload \(name) does not exist")
        }
        let resolved = String(cString: real)
        free(real)
        guard let realWorkdir = realpath(workdir, nil) else { throw JobFailure.failed("the work folder is gone") }
        let folder = String(cString: realWorkdir)
        free(realWorkdir)
        guard resolved.hasPrefix(folder + "/") else {
            throw JobFailure.failed("the program's payload \(name) is not inside its work folder")
        }
        guard let handle = FileHandle(forReadingAtPath: resolved) else {
            throw JobFailure.failed("the program's payload \(name) cannot be read")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxBytes + 1)) ?? Data()
        guard data.count <= maxBytes else {
            throw JobFailure.failed("the program's payload is larger than maxBytes (\(maxBytes) bytes)")
        }
        return [UInt8](data)
    }

    private static func makeWorkdir() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/runner-kind-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw JobFailure.failed("cannot make a work folder for the program: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }
}

/// Counts the attempts of one job.
final class AttemptCounter: Sendable {
    private let count = Atomic<Int>(0)
    func next() -> Int { count.add(1, ordering: .relaxed).newValue }
}
