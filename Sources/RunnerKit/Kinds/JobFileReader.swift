import Foundation

/// Reads the jobs of one job file, in any of its four forms:
/// one job object, a batch `{"defaults": {…}, "jobs": […]}`, a bare array of jobs, or
/// JSON Lines (one job per line; a first line `{"defaults": {…}}` sets defaults).
///
/// JSON Lines (`.jsonl`, `.ndjson`) stream: one line is in memory at a time, so a batch of a
/// million lines reads in flat memory. Reading yields a job or an error per job, so the same
/// pass serves validation (collect every error, keep no job) and running (feed the scheduler).
package final class JobFileReader: IteratorProtocol {
    package typealias Element = Result<JobDescriptor, JobFileError>

    package let path: String
    private let registry: KindRegistry
    private let limits: JobLimits
    private let checkingSecrets: Bool
    /// Secret references found expandable so far (checked once per file, not once per job).
    private var expandable: Set<String> = []
    private var source: Source
    private var defaults: [(key: String, value: JSONValue)] = []
    private var finished = false

    private enum Source {
        case document(jobs: [JSONValue], next: Int, single: Bool)
        case lines(LineReader)
        case failed(JobFileError)
    }

    /// Largest file read whole (a JSON document rather than JSON Lines).
    package static let maxDocumentBytes = 256 << 20

    /// - Parameters:
    ///   - limits: the operator's caps; a job asking more is an error of that job.
    ///   - checkingSecrets: whether a header's `{env:}` and `{file:}` references must expand here
    ///     and now (false for `submit`, whose environment is not the watcher's: syntax only).
    package init(path: String, registry: KindRegistry, limits: JobLimits = .none, checkingSecrets: Bool = true) {
        self.path = path
        self.registry = registry
        self.limits = limits
        self.checkingSecrets = checkingSecrets
        self.source = .failed(JobFileError(file: path, "could not be read"))
        self.source = open()
    }

    /// Reads the whole file and returns every error, or the number of jobs when it is valid.
    /// `counting` picks the jobs counted (all of them by default), e.g. those of one shard.
    package static func validate(
        path: String, registry: KindRegistry, limits: JobLimits = .none, limit: Int = 20, checkingSecrets: Bool = true,
        counting: (JobDescriptor) -> Bool = { _ in true }
    ) -> (jobs: Int, errors: [JobFileError]) {
        let reader = JobFileReader(path: path, registry: registry, limits: limits, checkingSecrets: checkingSecrets)
        var count = 0
        var errors: [JobFileError] = []
        while let element = reader.next() {
            switch element {
            case .success(let job): if counting(job) { count += 1 }
            case .failure(let error):
                errors.append(error)
                if errors.count >= limit { return (count, errors) }
            }
        }
        if errors.isEmpty && count == 0 && reader.sawJobs == false { errors.append(JobFileError(file: path, "holds no jobs")) }
        return (count, errors)
    }

    /// Whether any job (valid or not) was read.
    package private(set) var sawJobs = false

    package func next() -> Element? {
        let element = nextElement()
        if element != nil { sawJobs = true }
        return element
    }

    private func nextElement() -> Element? {
        guard !finished else { return nil }
        switch source {
        case .failed(let error):
            finished = true
            return .failure(error)
        case .document(let jobs, let index, let single):
            guard index < jobs.count else {
                finished = true
                return nil
            }
            source = .document(jobs: jobs, next: index + 1, single: single)
            return decode(jobs[index], at: single ? .file : .job(index + 1))
        case .lines(let reader):
            return nextLine(reader)
        }
    }

    // MARK: - Opening

    private func open() -> Source {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return .failed(JobFileError(file: path, "cannot be read: \(String(cString: strerror(errno)))"))
        }
        if (info.st_mode & S_IFMT) == S_IFDIR { return .failed(JobFileError(file: path, "is a directory, not a job file")) }
        if info.st_size == 0 { return .failed(JobFileError(file: path, "is empty")) }
        if JobFileFormat.isJSONLines(name: path) {
            guard let reader = LineReader(path: path) else {
                return .failed(JobFileError(file: path, "cannot be read: \(String(cString: strerror(errno)))"))
            }
            return .lines(reader)
        }
        if info.st_size > Self.maxDocumentBytes {
            return .failed(JobFileError(file: path, "is larger than 256 MiB; write large batches as JSON Lines (.jsonl)"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failed(JobFileError(file: path, "cannot be read"))
        }
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        if let line = Self.firstInvalidUTF8Line(bytes) {
            return .failed(JobFileError(file: path, location: .line(line), problem: JobSpecError(field: nil, "is not UTF-8 text")))
        }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            return .failed(JobFileError(file: path, "is empty"))
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            // Several JSON objects, one per line, in a file not named .jsonl: JSON Lines all the same.
            if error.message.hasPrefix("unexpected text after"), JobFileFormat.looksLikeJSONLines(bytes), let reader = LineReader(path: path) {
                return .lines(reader)
            }
            return .failed(JobFileError(file: path, "is not valid JSON: \(error)"))
        }
        switch document {
        case .array(let jobs):
            if jobs.isEmpty { return .failed(JobFileError(file: path, "holds an empty array of jobs")) }
            return .document(jobs: jobs, next: 0, single: false)
        case .object(let members):
            guard members.contains(where: { $0.key == "jobs" }) else {
                return .document(jobs: [document], next: 0, single: true)
            }
            for (key, value) in members {
                switch key {
                case "jobs":
                    guard case .array(let jobs) = value else {
                        return .failed(JobFileError(file: path, location: .file, problem: JobSpecError(field: "jobs", "must be an array of jobs, not \(value.typeDescription)")))
                    }
                    if jobs.isEmpty { return .failed(JobFileError(file: path, location: .file, problem: JobSpecError(field: "jobs", "is an empty array"))) }
                case "defaults":
                    if let error = setDefaults(value) { return .failed(error) }
                default:
                    return .failed(JobFileError(file: path, location: .file, problem: JobSpecError(field: key, "is not a field of a batch (a batch has 'defaults' and 'jobs')")))
                }
            }
            let jobs = document["jobs"]?.arrayValue ?? []
            return .document(jobs: jobs, next: 0, single: false)
        default:
            return .failed(JobFileError(file: path, "must hold a job object, a batch or an array of jobs, not \(document.typeDescription)"))
        }
    }

    private func setDefaults(_ value: JSONValue) -> JobFileError? {
        guard case .object(let members) = value else {
            return JobFileError(file: path, location: .defaults, problem: JobSpecError(field: nil, "must be an object, not \(value.typeDescription)"))
        }
        let known = Set(JobDescriptor.commonFields + registry.all.flatMap { $0.parameters.map(\.name) })
        if let unknown = members.first(where: { !known.contains($0.key) }) {
            return JobFileError(file: path, location: .defaults, problem: JobSpecError(field: unknown.key, "is not a field of any job kind"))
        }
        defaults = members
        return nil
    }

    // MARK: - Jobs

    /// The last job read, as its object and the file's defaults (from which `JobDescriptor.decode`
    /// makes the same job again, elsewhere). Nil after an error.
    package private(set) var lastJob: (object: [(key: String, value: JSONValue)], defaults: [(key: String, value: JSONValue)])?

    private func decode(_ value: JSONValue, at location: JobFileError.Location) -> Element {
        lastJob = nil
        guard case .object(let members) = value else {
            return .failure(JobFileError(file: path, location: location, problem: JobSpecError(field: nil, "must be a job object, not \(value.typeDescription)")))
        }
        do {
            let job = try JobDescriptor.decode(members, defaults: defaults, registry: registry, limits: limits)
            if checkingSecrets, let headers = job.headers?.headers { try checkSecrets(headers) }
            lastJob = (members, defaults)
            return .success(job)
        } catch {
            return .failure(JobFileError(file: path, location: location, problem: error))
        }
    }

    /// Every reference of `headers` must expand now; each distinct reference is tried once per file.
    private func checkSecrets(_ headers: [HeaderTemplate]) throws(JobSpecError) {
        for header in headers {
            let references = header.references
            if references.isEmpty || references.allSatisfy(expandable.contains) { continue }
            do {
                try header.check()
            } catch {
                throw JobSpecError(field: "headers", error.description)
            }
            expandable.formUnion(references)
        }
    }

    private func nextLine(_ reader: LineReader) -> Element? {
        while true {
            let line: ArraySlice<UInt8>?
            do {
                line = try reader.next()
            } catch {
                finished = true
                return .failure(JobFileError(file: path, location: .line(reader.lineNumber + 1), problem: JobSpecError(field: nil, "is longer than 16 MiB")))
            }
            guard var line else {
                finished = true
                return nil
            }
            let number = reader.lineNumber
            if number == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line = line.dropFirst(3) }
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            guard Self.isUTF8(line) else {
                return .failure(JobFileError(file: path, location: .line(number), problem: JobSpecError(field: nil, "is not UTF-8 text")))
            }
            let value: JSONValue
            do {
                value = try JSONParser.parse(line)
            } catch {
                return .failure(JobFileError(file: path, location: .line(number), problem: JobSpecError(field: nil, "is not valid JSON: \(error.message) at column \(error.column)")))
            }
            if number == firstContentLine(number), let members = value.objectValue, members.count == 1, members[0].key == "defaults" {
                if let error = setDefaults(members[0].value) {
                    return .failure(JobFileError(file: path, location: .line(number), problem: error.problem))
                }
                continue
            }
            sawContent = true
            return decode(value, at: .line(number))
        }
    }

    private var sawContent = false

    /// Defaults may only come before the first job.
    private func firstContentLine(_ number: Int) -> Int { sawContent ? -1 : number }

    /// Whether `bytes` are valid UTF-8; plain ASCII, the usual line, is told by one quick pass.
    static func isUTF8(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.withUnsafeBufferPointer(\.isASCII) || String(validating: bytes, as: UTF8.self) != nil
    }

    /// The line of the first byte that is not valid UTF-8, or nil when the whole text is valid.
    static func firstInvalidUTF8Line(_ bytes: [UInt8]) -> Int? {
        if String(validating: bytes, as: UTF8.self) != nil { return nil }
        var line = 1
        var start = 0
        for (i, byte) in bytes.enumerated() where byte == 0x0A {
            if String(validating: bytes[start..<i], as: UTF8.self) == nil { return line }
            line += 1
            start = i + 1
        }
        return line
    }
}
