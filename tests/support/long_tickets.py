"""Long, realistic raw Redmine tickets in the snapshot layout (deterministic for a seed).

Real service-desk tickets are not the tidy fixtures: people paste 70-line logs, 30-row tables,
25-item lists and paragraphs of 15 sentences, tickets gather 30+ journals (one-liners to very long
reports), custom fields pile up and subjects run to Redmine's 255 characters. This module writes
such tickets, Textile before the format switch and CommonMark after it (as ``fixtures/`` does), in
exactly the layout ``anchorkit transform`` reads: ``issues/<id>.json`` (``{"issue": {...}}`` as
Redmine returns it), ``lookups.json`` and ``state.json``. About 9,000 cl100k tokens per ticket.

After the switch people keep typing Textile habits into CommonMark texts: logs in ``<pre>`` (an
HTML block there) and ``|_. head |`` tables (a paragraph of pipe-led lines there); about a quarter
of the logs and tables of CommonMark texts are written so.

Some shapes are there to stress a splitter: one line longer than any chunk (minified JSON,
base64), a code block with a very long line, nested lists, a table with a very long row.

    write_long_snapshot(Path("snap"), 200, seed=0)   # -> the ticket ids written
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

FIRST_ID = 50001
SWITCH = "2025-04-01T00:00:00Z"  # texts created from then on are CommonMark
TEXT_FORMAT = ((SWITCH, "common_mark"),)  # RenderOptions.text_format for these tickets

USERS = {
    5: "佐藤 次郎",
    6: "鈴木 花子",
    7: "高橋 健",
    8: "田中 美咲",
    9: "伊藤 大輔",
    10: "渡辺 真由美",
    11: "山本 翔太",
    12: "中村 由紀",
    13: "小林 誠一",
    14: "加藤 恵",
    15: "吉田 誠",
    16: "Emily Carter",
    17: "Raj Patel",
    18: "山田 太郎",
}
STATUSES = {1: "新規", 2: "対応中", 3: "回答待ち", 4: "保留", 5: "完了", 6: "却下"}
TRACKERS = {1: "障害", 2: "問い合わせ", 3: "作業依頼", 4: "変更要求"}
PRIORITIES = {1: "低め", 2: "通常", 3: "高め", 4: "急いで", 5: "今すぐ"}
CATEGORIES = {
    1: "ネットワーク・VPN",
    2: "アカウント・パスワード",
    3: "メール・Teams",
    4: "PC・周辺機器",
    5: "業務システム",
    6: "サーバー・基盤",
}
VERSIONS = {1: "2025年度 上期改善", 2: "2026年3月定期メンテナンス", 3: "基幹システム更改フェーズ2"}
PROJECTS = {1: ("社内ITサービスデスク", "helpdesk"), 2: ("インフラ運用", "infra")}
CUSTOM_FIELDS = {
    3: "影響範囲",
    5: "発生拠点",
    7: "問い合わせ経路",
    8: "資産番号",
    9: "端末モデル",
    10: "OS バージョン",
    11: "利用者部署",
    12: "利用者内線",
    13: "ベンダー問い合わせ番号",
    14: "関連する変更番号",
    15: "SLA 区分",
    16: "一次回答期限",
    17: "解決期限",
    18: "根本原因分類",
    19: "再発防止策",
    20: "影響ユーザー数",
    21: "業務影響度",
    22: "エスカレーション先",
    23: "作業予定日",
    24: "作業担当ベンダー",
    25: "承認者",
    26: "費用負担部署",
    27: "ライセンス種別",
    28: "IP アドレス",
    29: "MAC アドレス",
    30: "設置場所",
    31: "保守契約番号",
    32: "備考",
    33: "Affected service",
    34: "Root cause category",
    35: "Customer reference",
    36: "影響を受けたアプリケーション",
    37: "復旧手順書",
    38: "監視アラート ID",
    39: "関連ナレッジ記事",
    40: "確認者",
}

_TOPICS = [
    "大阪支社の VPN 接続",
    "本社 3 階の複合機",
    "Outlook のメール送信",
    "経費精算システムのログイン",
    "Teams 会議の音声",
    "共有フォルダ \\\\fs01\\share のアクセス権",
    "新入社員用 PC のキッティング",
    "基幹システムの夜間バッチ",
    "Wi-Fi (corp-5G) の認証",
    "ファイルサーバーのディスク容量",
    "Active Directory のパスワードポリシー",
    "SSL 証明書の更新",
    "バックアップジョブ",
]
_PROBLEMS = [
    "が不安定になる",
    "ができない",
    "でエラー 0x80070005 が出る",
    "が非常に遅い",
    "の設定変更について",
    "が突然停止する",
    "で文字化けが発生する",
    "の手順を確認したい",
]
_SUBJECT_TAILS = [
    "（大阪支社・名古屋営業所の複数ユーザーから同様の報告あり、業務影響大のため至急対応希望）",
    " - 再発。前回 #12345 "
    "の対処（ファームウェア更新）後も週に数回発生しており、恒久対策の検討と、ベンダーへのエスカレーション要否の判断をお願いします",
    " / Users in the Osaka branch report intermittent disconnects after the firmware update; vendor case opened, "
    "workaround documented in the knowledge base",
    "【要確認】月末締め処理に影響するため、3 月 31 "
    "日までに暫定対処と恒久対策の方針を決めたい。経理部・情報システム部・ベンダーの三者で調整中",
]
JA_SENTENCES = [
    "在宅勤務中に VPN 接続が頻繁に切断されます。",
    "ルーターのファームウェアを更新したところ、一時的に改善しました。",
    "利用者から再度問い合わせがありました。",
    "ログを確認したところ、認証サーバーでタイムアウトが発生していました。",
    "来週の定期メンテナンスで対応する予定です。",
    "同じ症状が他の部署でも報告されています。",
    "パスワードの有効期限が切れていたため、再設定の手順を案内しました。",
    "ドライバーを再インストールして、しばらく様子を見てもらうことにしました！",
    "影響範囲を確認するため、各拠点の担当者にヒアリングを行いました。",
    "ベンダーに問い合わせたところ、既知の不具合であるとの回答を得ました。",
    "暫定対処として、接続先のゲートウェイを切り替えています。",
    "原因はまだ特定できていませんが、発生時刻に規則性があるように見えます？",
    "本件は経理部の月末処理に影響するため、優先度を上げて対応します．",
    "作業は業務時間外（19 時以降）に実施し、完了後に利用者へ連絡します。",
    "念のため、端末のイベントログと FortiClient のログを取得してください。",
    "設定変更の前後でスループットを計測し、結果を添付しました。",
]
EN_SENTENCES = [
    "The client shows error 809 after about ten minutes.",
    "Please check the proxy settings and restart the service.",
    "We rolled back the change at 21:40 and the alerts stopped.",
    "The vendor confirmed this is a known issue in firmware 7.2.4.",
    "I could not reproduce it on a wired connection.",
    "Throughput dropped to 2 Mbit/s during the incident window!",
    "Could you attach the full event log from the affected laptop?",
    "The certificate chain was incomplete on the second load balancer.",
    "Users in the Osaka branch were affected between 10:12 and 11:30.",
    "A permanent fix is planned for the March maintenance window.",
]
_HOSTS = ["vpn-gw01", "vpn-gw02", "fs01", "ad-dc01", "mail-relay02", "batch01", "lb-ext01"]
_LEVELS = ["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"]
_EVENTS = [
    "ike: phase1 negotiation failed (peer 203.0.113.{n}, reason=timeout)",
    "sslvpn: tunnel down user=osaka{n:03d} duration={n}s bytes_in={n}0421 bytes_out={n}9817",
    "auth: RADIUS request timed out after 5000 ms (server=10.10.{n}.5)",
    "kernel: eth1: link is down",
    "kernel: eth1: link is up, 1000 Mbps full duplex",
    "smbd[{n}]: share access denied for user CORP\\\\user{n:03d} on \\\\\\\\fs01\\\\share\\\\経理部",
    "java.lang.IllegalStateException: Connection pool exhausted (active={n}, max=50)",
    "    at com.example.batch.JobRunner.execute(JobRunner.java:{n})",
    "postfix/smtp[{n}]: connect to mx.example.co.jp[198.51.100.{n}]:25: Connection timed out",
    "cron[{n}]: (root) CMD (/opt/backup/bin/run_backup.sh --target nas02 --level {n})",
]


def _sentences(rng: random.Random, count: int, english_share: float = 0.3) -> list[str]:
    return [rng.choice(EN_SENTENCES if rng.random() < english_share else JA_SENTENCES) for _ in range(count)]


def _paragraph(rng: random.Random, count: int) -> str:
    parts = _sentences(rng, count)
    # Japanese runs on without spaces; an English sentence after anything gets one.
    return "".join(part if index == 0 or not part[0].isascii() else " " + part for index, part in enumerate(parts))


def _log(rng: random.Random, lines: int) -> list[str]:
    minute = rng.randrange(600)
    out = []
    for _ in range(lines):
        minute += rng.randrange(3)
        n = rng.randrange(1, 250)
        out.append(
            f"2026-03-{rng.randint(1, 28):02d} "
            f"{minute // 60 % 24:02d}:{minute % 60:02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d} "
            f"[{rng.choice(_LEVELS)}] {rng.choice(_HOSTS)} " + rng.choice(_EVENTS).format(n=n)
        )
    return out


def _code(rng: random.Random, lines: list[str], textile: bool, language: str = "") -> str:
    body = "\n".join(lines)
    if textile:
        return f'<pre><code class="{language}">\n{body}\n</code></pre>' if language else f"<pre>\n{body}\n</pre>"
    return f"```{language}\n{body}\n```"


def _table(rng: random.Random, rows: int, textile: bool, long_row: bool = False) -> str:
    header = ["拠点", "端末", "発生回数", "最終発生", "状態", "備考"]
    body = []
    for index in range(rows):
        note = (
            _paragraph(rng, rng.randint(8, 14))
            if long_row and index == rows // 2
            else rng.choice(["", "再起動で復旧", "ベンダー確認中", "n/a", "要再確認"])
        )
        body.append(
            [
                rng.choice(["本社", "大阪", "名古屋", "福岡", "札幌"]),
                f"PC-{rng.randrange(10000, 99999)}",
                str(rng.randrange(1, 40)),
                f"2026-03-{rng.randint(1, 28):02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}",
                rng.choice(["対応中", "完了", "保留"]),
                note,
            ]
        )
    if textile:
        return "\n".join(
            ["|_. " + " |_. ".join(header) + " |"]
            + ["| " + " | ".join(cell or " " for cell in row) + " |" for row in body]
        )
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(row) + " |" for row in body]
    )


def _list(rng: random.Random, items: int, textile: bool, nested: bool = False) -> str:
    numbered = rng.random() < 0.3
    lines = []
    for index in range(items):
        marker = ("#" if textile else f"{index + 1}.") if numbered else ("*" if textile else "-")
        lines.append(f"{marker} {_paragraph(rng, rng.randint(1, 2))}")
        if nested and rng.random() < 0.4:
            for _ in range(rng.randint(1, 3)):
                lines.append((marker[0] * 2 + " " if textile else "   - " if numbered else "  - ") + _paragraph(rng, 1))
    return "\n".join(lines)


def _heading(text: str, textile: bool) -> str:
    return f"h2. {text}" if textile else f"## {text}"


def _minified_json(rng: random.Random, records: int) -> str:
    return json.dumps(
        [
            {
                "id": rng.randrange(10**6),
                "host": rng.choice(_HOSTS),
                "status": rng.choice(["ok", "timeout", "denied"]),
                "latency_ms": rng.randrange(5000),
            }
            for _ in range(records)
        ],
        separators=(",", ":"),
    )


def _base64_line(rng: random.Random, length: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "".join(rng.choice(alphabet) for _ in range(length))


def _long_text(rng: random.Random, textile: bool, parts: int, stress: bool) -> str:
    """A description or a long note: headings, paragraphs, logs, tables, lists (and stress shapes)."""
    blocks = []
    for _ in range(parts):
        roll = rng.random()
        habit = textile or rng.random() < 0.25  # Textile markup typed into a CommonMark text
        if roll < 0.12:
            blocks.append(
                _heading(rng.choice(["現象", "再現手順", "調査結果", "暫定対処", "Root cause", "今後の対応"]), textile)
            )
        if roll < 0.35:
            blocks.append(_paragraph(rng, rng.choice([3, 6, 15])))
        elif roll < 0.55:
            blocks.append(_code(rng, _log(rng, rng.choice([12, 30, 75])), habit, rng.choice(["", "", "text", "bash"])))
        elif roll < 0.68:
            blocks.append(_table(rng, rng.choice([8, 30]), habit, long_row=stress and rng.random() < 0.1))
        elif roll < 0.83:
            blocks.append(_list(rng, rng.choice([6, 25]), textile, nested=rng.random() < 0.4))
        elif roll < 0.91:
            blocks.append(("bq. " if textile else "> ") + _paragraph(rng, rng.randint(3, 8)))
        elif roll < 0.92 and stress:
            blocks.append(_code(rng, [_minified_json(rng, rng.choice([20, 60]))], textile, "json"))
        elif roll < 0.93 and stress:
            blocks.append("証明書 (base64): " + _base64_line(rng, rng.choice([600, 2000])))
        elif roll < 0.94 and stress:
            # A long stretch of code without line breaks, then some ordinary lines.
            blocks.append(_code(rng, [_minified_json(rng, 40), *_log(rng, 8)], textile))
        else:
            blocks.append(
                _paragraph(rng, 2) + "\n" + _paragraph(rng, 2) + "\n" + _paragraph(rng, 3)
            )  # hard line breaks
    return "\n\n".join(blocks)


def _subject(rng: random.Random) -> str:
    subject = rng.choice(_TOPICS) + rng.choice(_PROBLEMS)
    if rng.random() < 0.35:
        subject += rng.choice(_SUBJECT_TAILS)
    return subject[:255]


def _timestamp(base_day: int, minutes: int) -> str:
    day, minute = divmod(minutes, 24 * 60)
    moment = date(2024, 1, 1) + timedelta(days=base_day + day)
    return f"{moment.isoformat()}T{minute // 60:02d}:{minute % 60:02d}:00Z"


def long_issue(ticket_id: int, rng: random.Random, stress: bool = True) -> dict[str, Any]:
    """One long ticket as Redmine's ``GET /issues/<id>.json?include=journals,...`` returns it.

    ``stress``: now and then a line longer than any chunk (minified JSON, base64, a table row of
    many sentences); without it every line is one a placement can put an anchor around.
    """
    textile = rng.random() < 0.5
    # Textile tickets (and all their journals) before the switch, CommonMark ones after it.
    base_day = rng.randrange(0, 300) if textile else rng.randrange(460, 700)
    user_ids = list(USERS)
    author = rng.choice(user_ids)
    project = rng.choice(list(PROJECTS))
    custom_fields = []
    for field_id in rng.sample(list(CUSTOM_FIELDS), rng.randint(8, len(CUSTOM_FIELDS))):
        value: Any = rng.choice(
            [
                "拠点全体",
                "大阪支社",
                "ポータル",
                "PC-" + str(rng.randrange(10000, 99999)),
                "Windows 11 23H2",
                "10.20.30.40",
                _paragraph(rng, 1),
                "",
            ]
        )
        if rng.random() < 0.1:
            value = [rng.choice(["経理部", "人事部", "営業部", "情報システム部"]) for _ in range(rng.randint(1, 4))]
        custom_fields.append({"id": field_id, "name": CUSTOM_FIELDS[field_id], "value": value})
    journals = []
    minutes = rng.randrange(8 * 60, 10 * 60)
    journal_count = rng.randint(30, 34)
    for index in range(journal_count):
        minutes += rng.randrange(10, 12 * 60)
        roll = rng.random()
        if roll < 0.4:
            notes = _paragraph(rng, 1)
        elif roll < 0.6:
            notes = ""
        elif roll < 0.93:
            notes = _paragraph(rng, rng.randint(2, 4))
        elif roll < 0.975:
            notes = (
                _paragraph(rng, 2)
                + "\n\n"
                + _code(rng, _log(rng, rng.choice([12, 12, 60])), textile or rng.random() < 0.25)
            )
        elif roll < 0.99:
            notes = _long_text(rng, textile, rng.randint(2, 3), stress)
        else:
            notes = _paragraph(rng, 15)
        details = []
        if not notes or rng.random() < 0.3:
            old_status, new_status = rng.sample(list(STATUSES), 2)
            details.append(
                {"property": "attr", "name": "status_id", "old_value": str(old_status), "new_value": str(new_status)}
            )
            if rng.random() < 0.4:
                details.append(
                    {
                        "property": "attr",
                        "name": "assigned_to_id",
                        "old_value": str(rng.choice(user_ids)),
                        "new_value": str(rng.choice(user_ids)),
                    }
                )
            if rng.random() < 0.3:
                field_id = custom_fields[0]["id"]
                details.append({"property": "cf", "name": str(field_id), "old_value": "個人", "new_value": "拠点全体"})
        journals.append(
            {
                "id": ticket_id * 100 + index,
                "user": {"id": (user := rng.choice(user_ids)), "name": USERS[user]},
                "notes": notes,
                "created_on": _timestamp(base_day, minutes),
                "updated_on": _timestamp(base_day, minutes),
                "private_notes": rng.random() < 0.03,
                "details": details,
            }
        )
    status = rng.choice(list(STATUSES))
    assignee = rng.choice(user_ids)
    return {
        "id": ticket_id,
        "project": {"id": project, "name": PROJECTS[project][0]},
        "tracker": {"id": (tracker := rng.choice(list(TRACKERS))), "name": TRACKERS[tracker]},
        "status": {"id": status, "name": STATUSES[status], "is_closed": status in (5, 6)},
        "priority": {"id": (priority := rng.choice(list(PRIORITIES))), "name": PRIORITIES[priority]},
        "author": {"id": author, "name": USERS[author]},
        "assigned_to": {"id": assignee, "name": USERS[assignee]},
        "category": {"id": (category := rng.choice(list(CATEGORIES))), "name": CATEGORIES[category]},
        "fixed_version": {"id": (version := rng.choice(list(VERSIONS))), "name": VERSIONS[version]},
        "subject": _subject(rng),
        "description": _long_text(rng, textile, rng.randint(2, 5), stress),
        "start_date": _timestamp(base_day, 0)[:10],
        "due_date": _timestamp(base_day + 30, 0)[:10],
        "done_ratio": rng.choice([0, 30, 50, 80, 100]),
        "is_private": False,
        "estimated_hours": float(rng.randint(1, 40)),
        "custom_fields": custom_fields,
        "created_on": _timestamp(base_day, rng.randrange(8 * 60)),
        "updated_on": journals[-1]["created_on"],
        "closed_on": journals[-1]["created_on"] if status in (5, 6) else None,
        "attachments": [
            {
                "id": ticket_id * 10 + n,
                "filename": f"log_{ticket_id}_{n}.zip",
                "filesize": rng.randrange(10**6),
                "content_type": "application/zip",
                "author": {"id": author, "name": USERS[author]},
                "created_on": _timestamp(base_day, 600),
            }
            for n in range(rng.randint(0, 5))
        ],
        "relations": [
            {
                "id": ticket_id * 10 + 1,
                "issue_id": ticket_id,
                "issue_to_id": ticket_id - 1,
                "relation_type": "relates",
                "delay": None,
            }
        ]
        if ticket_id > FIRST_ID and rng.random() < 0.3
        else [],
        "journals": journals,
    }


def lookups() -> dict[str, dict[str, dict[str, Any]]]:
    return {
        "statuses": {str(k): {"name": v, "is_closed": k in (5, 6)} for k, v in STATUSES.items()},
        "trackers": {str(k): {"name": v} for k, v in TRACKERS.items()},
        "priorities": {str(k): {"name": v} for k, v in PRIORITIES.items()},
        "users": {str(k): {"name": v} for k, v in USERS.items()},
        "versions": {str(k): {"name": v} for k, v in VERSIONS.items()},
        "categories": {str(k): {"name": v} for k, v in CATEGORIES.items()},
        "custom_fields": {str(k): {"name": v} for k, v in CUSTOM_FIELDS.items()},
        "projects": {str(k): {"name": name, "identifier": identifier} for k, (name, identifier) in PROJECTS.items()},
    }


def write_long_snapshot(
    folder: Path, count: int, seed: int = 0, first_id: int = FIRST_ID, stress: bool = True
) -> list[int]:
    """Write ``count`` long tickets as a snapshot in ``folder``; the ticket ids written."""
    issues = folder / "issues"
    issues.mkdir(parents=True, exist_ok=True)
    ids = list(range(first_id, first_id + count))
    for ticket_id in ids:
        issue = long_issue(ticket_id, random.Random(seed * 1_000_003 + ticket_id), stress)
        (issues / f"{ticket_id}.json").write_text(
            json.dumps({"issue": issue}, ensure_ascii=False, indent=1), encoding="utf-8"
        )
    (folder / "lookups.json").write_text(json.dumps(lookups(), ensure_ascii=False, indent=1), encoding="utf-8")
    state = {
        "version": 1,
        "cursor": "2026-03-17T08:00:00Z",
        "text_format": [{"since": SWITCH, "format": "common_mark"}],
    }
    (folder / "state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
    return ids
