/// What ending the abandoned jobs (`failAbandoned`) ended.
package struct QueueAbandoned: Sendable {
    /// Jobs ended `failed` ("abandoned by 3 runners").
    package var failed = 0
    /// Jobs that had ended, whose hooks runners left `maxClaims` times: each ends with its own
    /// status and a `hooks` failure (`hooks_failed`); their records, for the hooks' reports.
    package var hooksFailed: [(key: String, record: String, reason: String)] = []

    package init() {}
}
