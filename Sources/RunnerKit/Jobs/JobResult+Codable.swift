import Foundation

// A result encodes as its record (the JSON of `results/`), and two results are equal when their
// records and the counts of the jobs they started are.

extension JobResult: Equatable {
    public static func == (lhs: JobResult, rhs: JobResult) -> Bool {
        lhs.json == rhs.json && lhs.descendants == rhs.descendants
    }
}

extension JobResult: Codable {
    public func encode(to encoder: any Encoder) throws {
        try json.encode(to: encoder)
    }

    /// A result from its record, as `encode(to:)` writes it and `results/` holds it.
    public init(from decoder: any Decoder) throws {
        let record = try JSONValue(from: decoder)
        try self.init(recordValue: record, codingPath: decoder.codingPath)
    }

    private init(recordValue record: JSONValue, codingPath: [any CodingKey]) throws {
        func missing(_ field: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: codingPath, debugDescription: "a result record needs '\(field)'"))
        }
        func date(_ field: String) throws -> Date {
            guard let text = record[field]?.stringValue, let ms = Timestamp.milliseconds(text) else { throw missing(field) }
            return Date(timeIntervalSince1970: Double(ms) / 1000)
        }
        guard let key = record["key"]?.stringValue else { throw missing("key") }
        guard let kind = record["kind"]?.stringValue else { throw missing("kind") }
        guard let status = record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:)) else { throw missing("status") }
        self.init(
            key: key, kind: kind, url: record["url"]?.stringValue, status: status, output: record["output"]?.stringValue,
            error: record["error"]?.stringValue, httpStatus: record["httpStatus"]?.intValue, bytes: record["bytes"]?.intValue,
            sha256: record["sha256"]?.stringValue, attempts: record["attempts"]?.intValue ?? 0,
            waitedForNetworkMs: record["waitedForNetworkMs"]?.intValue ?? 0, durationMs: record["durationMs"]?.intValue ?? 0,
            startedAt: try date("startedAt"), finishedAt: try date("finishedAt"), details: record["details"]?.objectValue ?? [],
            parent: record["parent"]?.stringValue)
        if let reason = record["reason"]?.stringValue.flatMap(FailureReason.init(rawValue:)) { self.reason = reason }
        stale = record["stale"] == .bool(true)
        validators = Validators(record: record)
        waitedForHostMs = record["waitedForHostMs"]?.intValue ?? 0
        resumedFrom = record["resumedFrom"]?.intValue
        transferred = record["transferred"]?.intValue
        startedOver = record["startedOver"]?.stringValue
    }
}

extension JSONValue: Codable {
    private struct Member: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .number(let value):
            var container = encoder.singleValueContainer()
            if let whole = intValue { try container.encode(whole) } else { try container.encode(value) }
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .object(let members):
            var container = encoder.container(keyedBy: Member.self)
            for (key, value) in members { try container.encode(value, forKey: Member(stringValue: key)) }
        }
    }

    /// Objects decode with their members in the order the decoder lists them (a `JSONDecoder`
    /// does not keep the document's).
    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: Member.self) {
            self = .object(try container.allKeys.map { ($0.stringValue, try container.decode(JSONValue.self, forKey: $0)) })
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !container.isAtEnd { values.append(try container.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }
}
