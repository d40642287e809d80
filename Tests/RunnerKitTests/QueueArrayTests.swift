@testable import RunnerKit
import Testing

/// The text array literals the queue sends as one parameter (`unnest($1::text[])`): every
/// element quoted, `"` and `\` escaped, nil as NULL, anything else as it is.
struct QueueArrayTests {
    @Test func elementsAreQuotedAndEscapedAndNilIsNull() {
        #expect(JobQueue.array([] as [String?]) == "{}")
        #expect(JobQueue.array([1, -2, 9_000_000_000] as [Int64]) == "{1,-2,9000000000}")
        #expect(JobQueue.array(["plain"]) == #"{"plain"}"#)
        #expect(JobQueue.array([#"a"b"#, #"c\d"#, nil, "é{,} NULL", ""]) == #"{"a\"b","c\\d",NULL,"é{,} NULL",""}"#)
        #expect(JobQueue.array([#"{"key": "k\"1"}"#]) == #"{"{\"key\": \"k\\\"1\"}"}"#)
    }
}
