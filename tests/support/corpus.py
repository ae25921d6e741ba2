"""Generated anchored documents for the stats tests and benchmark (deterministic for a seed).

Shaped like transform's output (title, basic info, description, history with journal entries),
anchored with ``anchors.insert_anchors``, with Japanese/English text, mentions of other tickets
and, now and then, a long description or a code block.
"""

from __future__ import annotations

import random

from anchorkit.anchors import insert_anchors, title_line

_TOPICS = [
    "VPN接続",
    "プリンター",
    "メール送信",
    "アカウント",
    "Wi-Fi",
    "共有フォルダ",
    "Outlook",
    "Teams会議",
    "PCの起動",
    "経費精算システム",
]
_PROBLEMS = ["が不安定になる", "ができない", "でエラーが出る", "が遅い", "の設定を変更したい", "がロックされた"]
_SENTENCES = [
    "在宅勤務中にVPN接続が頻繁に切断されます。",
    "ルーターのファームウェアを更新したところ改善しました。",
    "The client shows error 809 after about ten minutes.",
    "利用者から再度問い合わせがありました。",
    "ログを確認したところ認証サーバーでタイムアウトが発生していました。",
    "Please check the proxy settings and restart the service.",
    "来週のメンテナンスで対応予定です。",
    "同じ症状が他の部署でも報告されています。",
    "パスワードの有効期限が切れていたため再設定を案内しました。",
    "ドライバーを再インストールして様子を見てもらいます。",
]
_USERS = ["佐藤次郎", "鈴木花子", "高橋健", "田中美咲"]
BASIC_INFO = "基本情報"


def generated_document(ticket_id: int, seed: int = 0, long_description: bool = False) -> tuple[str, str]:
    """An anchored document for ``ticket_id`` and its subject."""
    rng = random.Random(seed * 1_000_003 + ticket_id)
    subject = rng.choice(_TOPICS) + rng.choice(_PROBLEMS)

    def paragraph(sentences: int) -> str:
        text = "".join(rng.choice(_SENTENCES) for _ in range(sentences))
        if rng.random() < 0.3:
            text += f" 関連: #{rng.randrange(10_000, 99_999)}"
        return text

    description = [paragraph(rng.randint(2, 5)) for _ in range(24 if long_description else rng.randint(1, 3))]
    if rng.random() < 0.1:
        description.append("```\n# show running-config\n> 設定例\n```")
    lines = [
        title_line(ticket_id, subject),
        "",
        f"## {BASIC_INFO}",
        "",
        "- ステータス: 対応中\n- トラッカー: 障害\n- 優先度: 高\n- 担当者: " + rng.choice(_USERS),
        "",
        "## 説明",
        "",
        "\n\n".join(description),
        "",
        "## 対応履歴",
    ]
    for day in range(1, rng.randint(3, 8)):
        lines += [
            "",
            f"### [2026-03-{day:02d}] {rng.choice(_USERS)}",
            "",
            "- ステータス: 新規 → 対応中",
            "",
            paragraph(rng.randint(1, 3)),
        ]
    document = "\n".join(lines) + "\n"
    return insert_anchors(document, ticket_id, subject, unanchored_headings=[BASIC_INFO]), subject
