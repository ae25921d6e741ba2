"""A service desk's tickets and the questions its operators ask about them (deterministic for a seed).

The retrieval benchmark (``tests/benchmarks/bench_retrieval.py``) asks: given a question, does the
retriever bring back a chunk of the one ticket that answers it, and does that chunk name the ticket?
For the question to have one right answer, every ticket carries facts of its own (a host name, an
error code, a vendor case number, a change number) beside the facts it shares with the tickets on
the same topic (the cause, the fix). The topics repeat on purpose: twenty families of near-duplicate
tickets ("the VPN drops again, at another site"), some of them recurrences on the very same host,
which is where a retriever cites the wrong ticket most easily.

Tickets are written as Redmine's REST API returns them, in the snapshot layout ``anchorkit
transform`` reads (``issues/<id>.json``, ``lookups.json``, ``state.json``; the shape of ``fixtures/``),
Textile before the format switch and CommonMark after it, with the Textile habits people keep. A
third are long (pasted logs in fences or ``<pre>``, tables, long lists, 10-40 journals, some private
notes), a third medium, a third short one-liners with a couple of replies. Some journals and
sentences are English. A few issues are private; no question is about one, and no fact a question
needs is only in a private note.

    corpus = write_retrieval_snapshot(Path("snap"), tickets=160, seed=0)
    corpus.questions[0].text  # "osaka-vpngw-03 の VPN の DPD タイムアウトはどう解決した？"
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from support.long_tickets import (
    CATEGORIES,
    CUSTOM_FIELDS,
    EN_SENTENCES,
    JA_SENTENCES,
    PRIORITIES,
    PROJECTS,
    STATUSES,
    SWITCH,
    TRACKERS,
    USERS,
    _code,
    _list,
    _log,
    _table,
    lookups,
)

FIRST_ID = 30001
REDMINE_URL = "https://redmine.example.co.jp"
DEEP_JOURNALS = 10  # a question is "deep" when its key fact is in this journal or a later one
_SWITCH_AT = datetime.fromisoformat(SWITCH.replace("Z", "+00:00"))
_FIRST_DAY = datetime(2024, 6, 3, tzinfo=UTC)
_DAYS = 640  # tickets are created over this many days (so about half before the switch)

SITES = {
    "osaka": "大阪支社",
    "nagoya": "名古屋営業所",
    "fukuoka": "福岡営業所",
    "sapporo": "札幌営業所",
    "sendai": "仙台営業所",
    "tokyo": "東京本社",
    "yokohama": "横浜データセンター",
    "hiroshima": "広島営業所",
}


@dataclass(frozen=True)
class Family:
    """A topic that comes back in many tickets: what is shared, and how the unique facts look."""

    key: str
    tracker: int  # long_tickets.TRACKERS id
    category: int  # long_tickets.CATEGORIES id
    subjects: tuple[str, ...]  # {site}: the site's Japanese name
    symptom: str  # as an operator names it in a question (Japanese)
    symptom_en: str
    role: str  # the host-name part: osaka-<role>-03
    code: str  # an error code, {n}: a number unique in the corpus
    log_event: str  # a log line naming the code: {code}, {n}
    vendor: str
    causes: tuple[str, ...]
    fixes: tuple[str, ...]  # {version}: one of versions
    versions: tuple[str, ...]
    vendor_answers: tuple[str, ...]  # Japanese
    vendor_answers_en: tuple[str, ...]
    chatter: tuple[str, ...]  # topical sentences that say nothing specific


FAMILIES = (
    Family(
        key="vpn",
        tracker=1,
        category=1,
        subjects=("{site}の VPN トンネルが断続的に切断される", "VPN が切れる（{site}）", "{site} 拠点間 VPN の瞬断"),
        symptom="VPN の DPD タイムアウト",
        symptom_en="VPN DPD timeouts",
        role="vpngw",
        code="IKE-{n:05d}",
        log_event="ike: DPD timeout, tunnel to 203.0.113.{n} torn down (error {code})",
        vendor="ネットワーク保守ベンダー",
        causes=(
            "ISP 側の回線で夜間にパケットロスが発生していた",
            "DPD の間隔が短すぎてフェイルオーバー時に切断と判定されていた",
            "ファームウェアの既知の不具合で SA の再ネゴシエーションが失敗していた",
        ),
        fixes=(
            "DPD の間隔を 10 秒から 30 秒に変更",
            "ファームウェアを {version} に更新",
            "回線をバックアップ回線に切り替え",
        ),
        versions=("FortiOS 7.2.8", "FortiOS 7.2.10", "FortiOS 7.4.3"),
        vendor_answers=(
            "既知の不具合で次のパッチで修正済みとのこと",
            "回線品質の問題でありゲートウェイ側の設定は正しいとの回答",
        ),
        vendor_answers_en=(
            "this is a known issue fixed in the next patch release",
            "the gateway configuration is correct; the line is at fault",
        ),
        chatter=(
            "拠点間 VPN のトンネルが落ちると基幹システムの画面が固まります。",
            "VPN 装置のセッション数を確認しました。",
            "トンネル再確立までおよそ 40 秒かかっています。",
            "IPsec の SA が再作成されたログが残っています。",
        ),
    ),
    Family(
        key="printer",
        tracker=1,
        category=4,
        subjects=(
            "{site}の複合機で印刷できない",
            "複合機のエラー表示（{site}）",
            "{site} 複合機が紙詰まり表示のまま止まる",
        ),
        symptom="複合機のエラー",
        symptom_en="printer errors",
        role="mfp",
        code="SC{n:04d}",
        log_event="spooler: job {n} failed on printer, device reported {code}",
        vendor="複合機の保守業者",
        causes=(
            "定着ユニットの寿命で温度センサーが異常値を返していた",
            "ドライバーのバージョン違いで PCL の解釈に失敗していた",
            "給紙トレイのセンサーに紙片が挟まっていた",
        ),
        fixes=("定着ユニットを交換", "プリンタードライバーを {version} に統一", "給紙トレイのセンサーを清掃"),
        versions=("PCL6 ドライバー 4.12", "PCL6 ドライバー 4.15", "PS ドライバー 3.9"),
        vendor_answers=(
            "部品交換が必要で保守契約の範囲内で対応するとのこと",
            "ドライバーの既知の問題で最新版で解消するとの回答",
        ),
        vendor_answers_en=(
            "the fuser unit has reached end of life and will be replaced under contract",
            "a driver update resolves the rendering failure",
        ),
        chatter=(
            "複合機の操作パネルにエラーが表示されたままです。",
            "別フロアの複合機では問題なく印刷できています。",
            "印刷キューにジョブが溜まっています。",
            "電源の入れ直しで一時的に復旧しました。",
        ),
    ),
    Family(
        key="mail",
        tracker=1,
        category=3,
        subjects=(
            "{site}からの外部宛メールが遅延する",
            "メール送信が遅い（{site}）",
            "{site} の送信メールがキューに滞留する",
        ),
        symptom="メールの遅延",
        symptom_en="mail delivery delays",
        role="smtp",
        code="Q{n:06d}",
        log_event="postfix/qmgr: queue {code} deferred: 451 4.4.{n} temporary lookup failure",
        vendor="メールゲートウェイのベンダー",
        causes=(
            "送信先ドメインの DNS 応答が遅く配送がタイムアウトしていた",
            "迷惑メールフィルターの定義更新で CPU が張り付いていた",
            "リレー先の送信数制限に達していた",
        ),
        fixes=(
            "リレー先の送信レート制限を緩和",
            "フィルターエンジンを {version} に更新",
            "DNS キャッシュサーバーを追加",
        ),
        versions=("AsyncOS 15.0.1", "AsyncOS 15.5.2", "AsyncOS 16.0"),
        vendor_answers=(
            "定義更新の不具合で現在は修正版が配信済みとのこと",
            "送信数の上限は契約変更で引き上げ可能との回答",
        ),
        vendor_answers_en=(
            "a faulty definition update was pulled and a fixed one released",
            "the rate limit can be raised by a contract change",
        ),
        chatter=(
            "外部宛のメールが 30 分以上遅れて届くとの報告です。",
            "社内宛のメールは遅延していません。",
            "メールキューの件数を監視しています。",
            "送信ログを取引先とも突き合わせました。",
        ),
    ),
    Family(
        key="disk",
        tracker=1,
        category=6,
        subjects=(
            "{site}のファイルサーバー容量が逼迫",
            "共有フォルダに保存できない（{site}）",
            "{site} ファイルサーバーのディスク使用率 95% 超",
        ),
        symptom="ファイルサーバーの容量不足",
        symptom_en="file server disk space alerts",
        role="fs",
        code="ALERT-{n:06d}",
        log_event="monitor: alert {code} volume D: usage {n}% above threshold",
        vendor="ストレージベンダー",
        causes=(
            "退職者のホームフォルダが削除されずに残っていた",
            "シャドウコピーの保存領域が無制限になっていた",
            "ログのローテーションが止まりアプリのログが肥大化していた",
        ),
        fixes=("シャドウコピーの上限を 10% に設定", "ボリュームを 2 TB 拡張", "不要なホームフォルダをアーカイブに移動"),
        versions=("Windows Server 2019", "Windows Server 2022", "ONTAP 9.13"),
        vendor_answers=(
            "ボリュームはオンラインで拡張できるとのこと",
            "重複排除を有効にすれば 3 割程度削減できる見込みとの回答",
        ),
        vendor_answers_en=(
            "the volume can be grown online without downtime",
            "deduplication should reclaim about 30% of the space",
        ),
        chatter=(
            "共有フォルダへの保存時に容量不足のエラーが出ます。",
            "部署ごとの使用量を集計しました。",
            "容量の推移グラフを添付します。",
            "古いファイルの整理を各部署にお願いしています。",
        ),
    ),
    Family(
        key="lockout",
        tracker=2,
        category=2,
        subjects=(
            "{site}でアカウントが頻繁にロックされる",
            "AD アカウントロックアウト（{site}）",
            "{site} の利用者がログインできない",
        ),
        symptom="アカウントのロックアウト",
        symptom_en="account lockouts",
        role="dc",
        code="EVT4740-{n:05d}",
        log_event="security: event 4740 account locked out, caller {code}, source workstation PC-{n:05d}",
        vendor="ID 管理の保守ベンダー",
        causes=(
            "古いパスワードを保存したスマートフォンのメールアプリが認証を繰り返していた",
            "切断されたままのリモートデスクトップセッションが古い資格情報を使っていた",
            "サービスアカウントのパスワード変更がタスクスケジューラに反映されていなかった",
        ),
        fixes=(
            "スマートフォンのメールアカウントを再設定",
            "残っていた RDP セッションをサインアウト",
            "タスクの実行アカウントを更新",
        ),
        versions=("Windows Server 2016", "Windows Server 2022", "Entra Connect 2.3"),
        vendor_answers=(
            "ロックアウトの閾値を 10 回に緩めることを推奨とのこと",
            "発生元端末はイベントログから特定できるとの回答",
        ),
        vendor_answers_en=(
            "raising the lockout threshold to 10 attempts is recommended",
            "the source workstation can be traced in the logs",
        ),
        chatter=(
            "朝の始業時にロックされることが多いようです。",
            "パスワードリセットの手順を案内しました。",
            "ロックアウトの発生元を調べています。",
            "同じ部署の別の利用者は問題ありません。",
        ),
    ),
    Family(
        key="batch",
        tracker=1,
        category=5,
        subjects=(
            "{site}の夜間バッチが異常終了",
            "基幹システムの夜間バッチ失敗（{site}）",
            "{site} 月次締めバッチが終わらない",
        ),
        symptom="夜間バッチの異常終了",
        symptom_en="nightly batch failures",
        role="batch",
        code="JOB{n:05d}",
        log_event="jobrunner: {code} ended abnormally RC=12 after {n} s",
        vendor="基幹システムの開発ベンダー",
        causes=(
            "DB のコネクションプールが枯渇していた",
            "前日のデータ取り込みが遅れて後続ジョブが待ちきれなかった",
            "一時領域の容量不足でソートが失敗していた",
        ),
        fixes=(
            "コネクションプールの上限を 50 から 120 に変更",
            "ジョブネットの開始時刻を 1 時間後ろ倒し",
            "一時領域を 200 GB に拡張",
        ),
        versions=("JP1 12.6", "JP1 13.0", "バッチ基盤 3.2"),
        vendor_answers=(
            "アプリ側の修正パッチを次回リリースに含めるとのこと",
            "ジョブの多重度を下げれば回避できるとの回答",
        ),
        vendor_answers_en=(
            "an application fix will ship with the next release",
            "lowering the job concurrency avoids the failure",
        ),
        chatter=(
            "朝 8 時の時点でバッチが完了していませんでした。",
            "ジョブの再実行で復旧しています。",
            "経理部の月次処理に影響が出ています。",
            "ジョブログを確認したところ途中で止まっていました。",
        ),
    ),
    Family(
        key="cert",
        tracker=3,
        category=6,
        subjects=(
            "{site}向け SSL 証明書の期限切れ",
            "証明書エラーでサイトが開けない（{site}）",
            "{site} ロードバランサーの証明書更新",
        ),
        symptom="証明書エラー",
        symptom_en="certificate errors",
        role="lb",
        code="SN{n:08d}",
        log_event="ssl: certificate serial {code} expired, handshake failed for client 10.2.{n}.9",
        vendor="認証局の販売代理店",
        causes=(
            "中間証明書が入れ替わったのにロードバランサーに古いチェーンが残っていた",
            "証明書の更新通知メールが退職者宛てになっていた",
            "更新した証明書が片系の装置にしか入っていなかった",
        ),
        fixes=(
            "中間証明書を含むチェーンを再設定",
            "両系の装置に新しい証明書を配布",
            "更新通知の宛先を共有メールボックスに変更",
        ),
        versions=("BIG-IP 16.1", "BIG-IP 17.1", "nginx 1.24"),
        vendor_answers=(
            "新しい中間証明書に切り替わっているので差し替えが必要とのこと",
            "再発行は無償で対応できるとの回答",
        ),
        vendor_answers_en=(
            "the intermediate certificate has changed and must be replaced",
            "the certificate can be reissued free of charge",
        ),
        chatter=(
            "ブラウザーで証明書の警告が表示されます。",
            "社外からのアクセスだけで発生しています。",
            "証明書の有効期限を一覧にしました。",
            "取引先から接続できないと連絡がありました。",
        ),
    ),
    Family(
        key="backup",
        tracker=1,
        category=6,
        subjects=(
            "{site}のバックアップジョブが失敗する",
            "夜間バックアップエラー（{site}）",
            "{site} のバックアップが完了しない",
        ),
        symptom="バックアップの失敗",
        symptom_en="backup job failures",
        role="bkp",
        code="BKJ-{n:05d}",
        log_event="backup: job {code} failed, snapshot of volume {n} could not be created",
        vendor="バックアップソフトのサポート窓口",
        causes=(
            "VSS ライターがタイムアウトしてスナップショットが作れなかった",
            "テープドライブのヘッド汚れで書き込みエラーが出ていた",
            "保存先 NAS の容量が足りなかった",
        ),
        fixes=(
            "VSS のタイムアウトを 600 秒に延長",
            "テープドライブをクリーニング",
            "バックアップソフトを {version} に更新",
        ),
        versions=("Veeam 12.1", "Veeam 12.3", "Arcserve UDP 9.2"),
        vendor_answers=("既知の問題で最新のパッチで解消済みとのこと", "VSS の設定値を見直すよう案内がありました"),
        vendor_answers_en=(
            "this is a known issue resolved by the latest patch",
            "the VSS timeout settings should be reviewed",
        ),
        chatter=(
            "バックアップの完了メールが届いていません。",
            "前回成功したのは 3 日前です。",
            "リストアテストは問題ありませんでした。",
            "ジョブの所要時間が徐々に延びています。",
        ),
    ),
    Family(
        key="wifi",
        tracker=1,
        category=1,
        subjects=(
            "{site}で社内 Wi-Fi に接続できない",
            "Wi-Fi 認証エラー（{site}）",
            "{site} 無線 LAN がつながりにくい",
        ),
        symptom="Wi-Fi の認証エラー",
        symptom_en="Wi-Fi authentication failures",
        role="wlc",
        code="RAD-{n:05d}",
        log_event="radius: Access-Reject for user{n:03d}, reason {code}",
        vendor="無線 LAN の構築ベンダー",
        causes=(
            "RADIUS サーバーの証明書が更新されていなかった",
            "アクセスポイントのチャネルが隣のビルと干渉していた",
            "端末の無線ドライバーが古く WPA3 に対応していなかった",
        ),
        fixes=(
            "RADIUS サーバーの証明書を更新",
            "チャネル設定を自動から固定に変更",
            "無線ドライバーを {version} に更新",
        ),
        versions=("Intel Wi-Fi 23.40", "Intel Wi-Fi 23.60", "AireOS 8.10"),
        vendor_answers=("干渉の調査のためサイトサーベイを実施するとのこと", "ドライバーの既知の不具合との回答"),
        vendor_answers_en=("a site survey will be scheduled to find the interference", "this is a known driver bug"),
        chatter=(
            "会議室に移動すると接続が切れるとのことです。",
            "有線 LAN では問題ありません。",
            "アクセスポイントの接続台数を確認しました。",
            "スマートフォンでも同じ症状が出ています。",
        ),
    ),
    Family(
        key="teams",
        tracker=2,
        category=3,
        subjects=(
            "{site}で Teams 会議の音声が途切れる",
            "Teams の音声品質（{site}）",
            "{site} 会議室の Teams 端末で音が出ない",
        ),
        symptom="Teams 会議の音声トラブル",
        symptom_en="Teams audio problems",
        role="mtr",
        code="CQD-{n:05d}",
        log_event="teams: call quality alert {code}, jitter {n} ms, packet loss above 5%",
        vendor="会議室システムの販売店",
        causes=(
            "QoS の設定がなく音声パケットが他の通信に埋もれていた",
            "USB スピーカーフォンのファームウェアが古かった",
            "プロキシ経由でメディア通信が TCP にフォールバックしていた",
        ),
        fixes=(
            "音声通信に QoS を設定",
            "スピーカーフォンのファームウェアを {version} に更新",
            "メディア通信をプロキシの対象外に変更",
        ),
        versions=("Jabra 3.2.1", "Poly 4.0.5", "Teams Rooms 5.2"),
        vendor_answers=(
            "メディア通信はプロキシを経由させないのが推奨とのこと",
            "ファームウェア更新で改善した事例があるとの回答",
        ),
        vendor_answers_en=(
            "media traffic should bypass the proxy",
            "a firmware update fixed the same symptom for other customers",
        ),
        chatter=(
            "会議中に相手の声が途切れるとの報告です。",
            "通話品質のダッシュボードを確認しました。",
            "特定の会議室でだけ発生しています。",
            "ヘッドセットを替えても改善しませんでした。",
        ),
    ),
    Family(
        key="db",
        tracker=1,
        category=5,
        subjects=(
            "{site}の DB レプリケーション遅延",
            "DB 同期遅延アラート（{site}）",
            "{site} 参照系 DB のデータが古い",
        ),
        symptom="DB のレプリケーション遅延",
        symptom_en="database replication lag",
        role="db",
        code="ORA-{n:05d}",
        log_event="dataguard: apply lag {n} s on standby, last error {code}",
        vendor="データベースの保守ベンダー",
        causes=(
            "アーカイブログの転送経路の帯域が不足していた",
            "大量更新のバッチがピーク時間に動いていた",
            "スタンバイ側のディスク I/O が飽和していた",
        ),
        fixes=("転送経路の帯域を 1 Gbps に増強", "大量更新バッチを夜間に移動", "スタンバイ側のストレージを SSD に交換"),
        versions=("Oracle 19.21", "Oracle 19.23", "PostgreSQL 15.6"),
        vendor_answers=("設定は推奨値どおりで帯域の増強が必要とのこと", "パッチ適用で適用処理が速くなるとの回答"),
        vendor_answers_en=(
            "the settings match the recommendation; more bandwidth is needed",
            "a patch speeds up log apply",
        ),
        chatter=(
            "参照系の画面で当日のデータが表示されません。",
            "遅延は日中に大きくなります。",
            "レプリケーションの状態を 5 分おきに確認しています。",
            "業務部門に状況を連絡しました。",
        ),
    ),
    Family(
        key="dns",
        tracker=1,
        category=6,
        subjects=(
            "{site}で社内サイトの名前解決に失敗",
            "DNS が引けない（{site}）",
            "{site} の端末から社内ポータルが開けない",
        ),
        symptom="名前解決の失敗",
        symptom_en="DNS resolution failures",
        role="dns",
        code="SERVFAIL-{n:05d}",
        log_event="named: query {code} for portal.corp.example SERVFAIL from 10.8.{n}.21",
        vendor="ネットワーク保守ベンダー",
        causes=(
            "条件付きフォワーダーの転送先が廃止済みのサーバーを指していた",
            "DNSSEC の署名の期限が切れていた",
            "DHCP で配布する DNS サーバーの順序が誤っていた",
        ),
        fixes=("条件付きフォワーダーの転送先を修正", "ゾーンを再署名", "DHCP のオプション 6 を修正"),
        versions=("BIND 9.18", "BIND 9.20", "Windows DNS 2022"),
        vendor_answers=(
            "設定の誤りでありソフトウェアの不具合ではないとの回答",
            "署名の自動更新を有効にするよう推奨がありました",
        ),
        vendor_answers_en=("it is a configuration error, not a software bug", "automatic re-signing should be enabled"),
        chatter=(
            "社内ポータルだけが開けないとの問い合わせです。",
            "IP アドレス直打ちでは接続できます。",
            "nslookup の結果を添付します。",
            "キャッシュをクリアしても変わりませんでした。",
        ),
    ),
    Family(
        key="proxy",
        tracker=2,
        category=1,
        subjects=(
            "{site}でプロキシ認証が繰り返し求められる",
            "インターネットにつながらない（{site}）",
            "{site} プロキシ経由の通信が遅い",
        ),
        symptom="プロキシ認証エラー",
        symptom_en="proxy authentication prompts",
        role="proxy",
        code="PX{n:06d}",
        log_event="squid: request {code} 407 Proxy Authentication Required from 10.30.{n}.4",
        vendor="プロキシ製品の代理店",
        causes=(
            "Kerberos のチケットが取れず NTLM にフォールバックしていた",
            "PAC ファイルの記述ミスで一部の宛先が直接通信になっていた",
            "認証キャッシュの有効期限が短すぎた",
        ),
        fixes=("プロキシの SPN を登録し直した", "PAC ファイルの除外リストを修正", "認証キャッシュを 8 時間に延長"),
        versions=("Squid 6.6", "Squid 6.10", "Blue Coat 7.3"),
        vendor_answers=("SPN の重複が原因である可能性が高いとのこと", "認証キャッシュは 8 時間程度が一般的との回答"),
        vendor_answers_en=(
            "a duplicate SPN is the most likely cause",
            "an eight-hour authentication cache is common practice",
        ),
        chatter=(
            "ブラウザーを開くたびに認証画面が出ます。",
            "一部のサイトだけ表示が遅いです。",
            "プロキシのアクセスログを抽出しました。",
            "別の拠点では発生していません。",
        ),
    ),
    Family(
        key="ups",
        tracker=1,
        category=6,
        subjects=("{site}サーバールームの UPS 警告", "UPS のバッテリー異常（{site}）", "{site} の UPS から警報音"),
        symptom="UPS のバッテリー警告",
        symptom_en="UPS battery alarms",
        role="ups",
        code="UPS-{n:05d}",
        log_event="ups: alarm {code} battery self-test failed, runtime {n} min",
        vendor="電源設備の保守業者",
        causes=(
            "バッテリーが交換時期を過ぎていた",
            "空調停止で室温が上がりバッテリーが劣化していた",
            "ネットワークカードのファームウェアが誤検知していた",
        ),
        fixes=(
            "バッテリーを交換",
            "ネットワークカードのファームウェアを {version} に更新",
            "サーバールームの空調を点検",
        ),
        versions=("NMC 2.5", "NMC 3.1", "PowerChute 10.0"),
        vendor_answers=("交換用バッテリーは 2 週間で手配できるとのこと", "ファームウェアの誤検知で実害はないとの回答"),
        vendor_answers_en=(
            "replacement batteries can be shipped within two weeks",
            "the alarm is a firmware false positive",
        ),
        chatter=(
            "サーバールームで警報音が鳴っていると連絡がありました。",
            "停電は発生していません。",
            "UPS の管理画面でイベント履歴を確認しました。",
            "保守契約の内容を確認しています。",
        ),
    ),
    Family(
        key="nas",
        tracker=1,
        category=6,
        subjects=("{site}の NAS が遅い", "NAS の応答遅延（{site}）", "{site} 設計データ用 NAS でタイムアウト"),
        symptom="NAS の遅延",
        symptom_en="NAS latency",
        role="nas",
        code="LAT-{n:05d}",
        log_event="nfs: server not responding, latency alert {code} at {n} ms",
        vendor="ストレージベンダー",
        causes=(
            "RAID の再構築中で I/O 性能が落ちていた",
            "ウイルス対策ソフトのスキャン対象に NAS が含まれていた",
            "NIC のネゴシエーションが 100 Mbps に落ちていた",
        ),
        fixes=(
            "ウイルス対策のスキャン対象から NAS を除外",
            "スイッチのポート速度を 1 Gbps 固定に変更",
            "故障ディスクを交換して RAID を再構築",
        ),
        versions=("DSM 7.2", "QTS 5.1", "ONTAP 9.14"),
        vendor_answers=("再構築完了まで 18 時間程度かかる見込みとのこと", "スキャン除外の設定が推奨との回答"),
        vendor_answers_en=(
            "the rebuild will take about 18 hours",
            "excluding the share from the scan is the recommended setting",
        ),
        chatter=(
            "CAD のファイルを開くのに数分かかるとのことです。",
            "夕方になると遅くなる傾向があります。",
            "NAS のリソースモニターを確認しました。",
            "ファイルコピーの速度を計測しました。",
        ),
    ),
    Family(
        key="web",
        tracker=1,
        category=5,
        subjects=(
            "{site}向け業務ポータルで 502 エラー",
            "ポータルが開けない（{site}）",
            "{site} 経費精算画面で Bad Gateway",
        ),
        symptom="ポータルの 502 エラー",
        symptom_en="portal 502 errors",
        role="web",
        code="REQ-{n:06d}",
        log_event="nginx: upstream timed out for request {code}, upstream 10.40.{n}.7:8080",
        vendor="業務ポータルの開発ベンダー",
        causes=(
            "アプリサーバーのスレッドが枯渇していた",
            "ヘルスチェックの間隔が長く停止したノードに振り分けていた",
            "セッション情報のキャッシュサーバーが落ちていた",
        ),
        fixes=(
            "アプリサーバーのスレッド上限を 200 に変更",
            "ヘルスチェックの間隔を 5 秒に短縮",
            "キャッシュサーバーを冗長化",
        ),
        versions=("Tomcat 9.0.85", "Tomcat 10.1.20", "nginx 1.26"),
        vendor_answers=(
            "アプリの不具合ではなくインフラ設定の問題との回答",
            "次回リリースで接続プールの既定値を見直すとのこと",
        ),
        vendor_answers_en=(
            "the application is fine; the infrastructure settings are at fault",
            "the next release changes the pool defaults",
        ),
        chatter=(
            "月末に利用者が集中すると発生します。",
            "再読み込みすると表示されることがあります。",
            "ロードバランサーの振り分け状況を確認しました。",
            "アプリのログにタイムアウトが出ています。",
        ),
    ),
    Family(
        key="kitting",
        tracker=3,
        category=4,
        subjects=("{site}新入社員用 PC のキッティング", "PC セットアップ依頼（{site}）", "{site} 配属者の PC 準備"),
        symptom="PC キッティングの不具合",
        symptom_en="PC setup problems",
        role="pc",
        code="KIT-{n:05d}",
        log_event="intune: enrollment {code} failed for device PC-{n:05d} (0x80180014)",
        vendor="PC の導入業者",
        causes=(
            "Autopilot のプロファイルが割り当てられていなかった",
            "BIOS のバージョンが古く TPM が認識されなかった",
            "イメージに古いドライバーが含まれていた",
        ),
        fixes=("Autopilot のプロファイルを再割り当て", "BIOS を {version} に更新", "イメージを作り直した"),
        versions=("BIOS 1.18", "BIOS 1.21", "Windows 11 24H2"),
        vendor_answers=("TPM の認識には BIOS 更新が必要とのこと", "残りの端末は工場出荷前に更新するとの回答"),
        vendor_answers_en=(
            "a BIOS update is required for the TPM to be detected",
            "the remaining devices will be updated before shipping",
        ),
        chatter=(
            "4 月入社の 12 名分を準備します。",
            "アカウントの発行は人事部の承認後です。",
            "端末の資産番号を台帳に登録しました。",
            "キッティング手順書を更新しました。",
        ),
    ),
    Family(
        key="sso",
        tracker=1,
        category=2,
        subjects=(
            "{site}でクラウドサービスにサインインできない",
            "SSO ログインエラー（{site}）",
            "{site} の利用者がシングルサインオンで弾かれる",
        ),
        symptom="SSO のサインインエラー",
        symptom_en="SSO sign-in errors",
        role="idp",
        code="AADSTS{n:06d}",
        log_event="idp: SAML response rejected, error {code}, correlation {n}",
        vendor="ID 管理の保守ベンダー",
        causes=(
            "IdP の署名証明書がローテーションされ SP 側に未反映だった",
            "端末の時刻がずれて SAML の有効期限外になっていた",
            "条件付きアクセスのポリシーで拠点の IP が許可されていなかった",
        ),
        fixes=("SP 側に新しい署名証明書を登録", "端末の時刻同期先を修正", "条件付きアクセスに拠点の IP 範囲を追加"),
        versions=("AD FS 2019", "Entra ID", "Okta 2024.03"),
        vendor_answers=(
            "証明書のロールオーバーは自動ではないため手動登録が必要とのこと",
            "時刻のずれは 5 分まで許容されるとの回答",
        ),
        vendor_answers_en=(
            "certificate rollover is manual on the service provider side",
            "a clock skew of up to five minutes is tolerated",
        ),
        chatter=(
            "サインイン画面でエラーコードが表示されます。",
            "ブラウザーを変えても同じです。",
            "サインインログを確認しました。",
            "影響は営業部の利用者に集中しています。",
        ),
    ),
    Family(
        key="switch",
        tracker=1,
        category=1,
        subjects=(
            "{site}フロアスイッチのポートがリンクダウンを繰り返す",
            "有線 LAN が切れる（{site}）",
            "{site} のスイッチでポートフラップ",
        ),
        symptom="スイッチのポートフラップ",
        symptom_en="switch port flapping",
        role="sw",
        code="PORT-{n:05d}",
        log_event="%LINK-3-UPDOWN: Interface Gi1/0/{n}, changed state to down (event {code})",
        vendor="ネットワーク保守ベンダー",
        causes=(
            "LAN ケーブルの劣化でリンクが不安定だった",
            "省電力機能 EEE と端末の NIC の相性問題だった",
            "ループ検知で該当ポートがシャットダウンされていた",
        ),
        fixes=("LAN ケーブルを交換", "該当ポートの EEE を無効化", "ループの原因になっていたハブを撤去"),
        versions=("IOS XE 17.9", "IOS XE 17.12", "AlaxalA 4.2"),
        vendor_answers=(
            "EEE の相性問題は既知で無効化を推奨とのこと",
            "ポートの物理層エラーが多くケーブル交換を推奨との回答",
        ),
        vendor_answers_en=(
            "EEE incompatibility is known; disabling it is recommended",
            "the port shows physical errors; replace the cable",
        ),
        chatter=(
            "数分おきに有線 LAN が切れるとのことです。",
            "隣の席の端末は問題ありません。",
            "スイッチのログを取得しました。",
            "ポートの統計情報にエラーが増えています。",
        ),
    ),
    Family(
        key="ntp",
        tracker=1,
        category=6,
        subjects=("{site}のサーバー時刻がずれる", "時刻同期エラー（{site}）", "{site} の時刻ずれで認証に失敗"),
        symptom="時刻のずれ",
        symptom_en="clock drift",
        role="ntp",
        code="NTP-{n:05d}",
        log_event="chronyd: clock offset {n} ms exceeds limit (alarm {code})",
        vendor="基盤の保守ベンダー",
        causes=(
            "上位の NTP サーバーへの通信がファイアウォールで遮断されていた",
            "仮想マシンの時刻同期がハイパーバイザーと二重になっていた",
            "うるう秒の処理で時刻が飛んでいた",
        ),
        fixes=(
            "ファイアウォールで UDP 123 を許可",
            "ハイパーバイザー側の時刻同期を無効化",
            "NTP の参照先を社内の 2 台に統一",
        ),
        versions=("chrony 4.3", "chrony 4.5", "Windows Time 2022"),
        vendor_answers=("時刻同期の二重設定は非推奨とのこと", "参照先は 3 台以上を推奨との回答"),
        vendor_answers_en=(
            "double time synchronisation is not supported",
            "at least three time sources are recommended",
        ),
        chatter=(
            "ログの時刻が数分ずれています。",
            "Kerberos 認証でエラーが出ることがあります。",
            "時刻同期の状態を確認しました。",
            "監視サーバーからアラートが上がっています。",
        ),
    ),
)


@dataclass(frozen=True)
class Question:
    """A question an operator asks, and the one ticket that answers it."""

    text: str
    ticket_id: int
    kind: str  # fix-by-host, fix-by-code, vendor-answer, change, cause, by-site
    key_facts: tuple[str, ...]  # what the question names: in this ticket, in no other
    answer_facts: tuple[str, ...]  # what answers it: in this ticket
    depth: int  # the journal holding the key fact, counted from 1 (0: the description)

    @property
    def deep(self) -> bool:
        return self.depth >= DEEP_JOURNALS


@dataclass
class _Facts:
    family: Family
    site: str
    host: str
    code: str
    cause: str
    fix: str
    case: str | None = None  # vendor case number (medium and long tickets)
    vendor_answer: str | None = None
    change: str | None = None  # change number (long tickets)
    depth: dict[str, int] = field(default_factory=dict)  # fact -> journals before the one holding it


@dataclass(frozen=True)
class RetrievalCorpus:
    ticket_ids: list[int]
    private_ticket_ids: list[int]
    questions: list[Question]


class _Unique:
    """Numbers drawn at random, never the same twice (so that facts name one ticket)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng, self._used = rng, set[str]()

    def __call__(self, template: str) -> str:
        """``template`` with ``{n:0Wd}`` filled in (W digits, the first of them not 0)."""
        width = int(template.split("{n:0")[1][0])
        while True:
            value = template.format(n=self._rng.randrange(10 ** (width - 1), 10**width))
            if value not in self._used:
                self._used.add(value)
                return value


def _sentence_run(rng: random.Random, pool: tuple[str, ...] | list[str], count: int) -> str:
    parts = [rng.choice(pool) for _ in range(count)]
    return "".join(part if index == 0 or not part[0].isascii() else " " + part for index, part in enumerate(parts))


def _chatter(rng: random.Random, family: Family, count: int) -> str:
    """Sentences on the ticket's topic (and the desk's everyday ones) that name nothing specific."""
    pool = [*family.chatter, *family.chatter, *JA_SENTENCES[:6], *EN_SENTENCES[:3]]
    return _sentence_run(rng, pool, count)


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _fact_log(rng: random.Random, facts: _Facts, textile: bool, lines: int) -> str:
    """A pasted log: the desk's usual noise with the ticket's host and error code in a few lines."""
    noise = _log(rng, lines)
    for index in sorted(rng.sample(range(lines), max(1, lines // 10))):
        stamp = noise[index][:23]
        event = facts.family.log_event.format(code=facts.code, n=rng.randrange(1, 250))
        noise[index] = f"{stamp} [ERROR] {facts.host} {event}"
    return _code(rng, noise, textile or rng.random() < 0.25, rng.choice(["", "text"]))


def _heading(text: str, textile: bool) -> str:
    return f"h2. {text}" if textile else f"## {text}"


def _description(rng: random.Random, facts: _Facts, shape: str, textile: bool, created: datetime) -> str:
    family = facts.family
    when = f"{created.month}月{created.day}日 {created.hour:02d}:{created.minute:02d}"
    opening = (
        f"{when} 頃から{SITES[facts.site]}の {facts.host} で{family.symptom}が発生しています。"
        f"エラーコードは {facts.code} です。"
    )
    if shape == "short":
        return opening + _chatter(rng, family, rng.randint(1, 3))
    blocks = [_heading("現象", textile), opening + _chatter(rng, family, rng.randint(3, 6))]
    blocks.append(_fact_log(rng, facts, textile, rng.choice([12, 30] if shape == "medium" else [30, 60, 75])))
    if shape == "long":
        blocks += [_heading("影響範囲", textile), _table(rng, rng.choice([8, 20, 30]), textile or rng.random() < 0.25)]
        blocks += [_heading("これまでの対応", textile), _list(rng, rng.choice([6, 15, 25]), textile, nested=True)]
        if rng.random() < 0.5:
            blocks.append(("bq. " if textile else "> ") + _chatter(rng, family, rng.randint(2, 4)))
    else:
        blocks.append(_list(rng, rng.randint(3, 6), textile))
    return "\n\n".join(blocks)


def _noise_note(rng: random.Random, facts: _Facts, textile: bool) -> str:
    roll = rng.random()
    if roll < 0.45:
        return _chatter(rng, facts.family, 1)
    if roll < 0.8:
        return _chatter(rng, facts.family, rng.randint(2, 5))
    if roll < 0.92:
        return _chatter(rng, facts.family, 2) + "\n\n" + _fact_log(rng, facts, textile, rng.choice([12, 12, 40]))
    return _chatter(rng, facts.family, 2) + "\n\n" + _table(rng, 8, textile or rng.random() < 0.25)


def _fact_notes(rng: random.Random, facts: _Facts, textile: bool) -> dict[str, str]:
    """The journals that carry the ticket's facts, by the fact they carry."""
    family = facts.family
    notes = {
        "cause": f"原因が判明しました。{facts.cause}ことが原因です。" + _chatter(rng, family, rng.randint(0, 2)),
        "fix": (
            f"{facts.fix}したところ、{facts.host} の{family.symptom}は解消しました。" + _chatter(rng, family, 1)
            if facts.change is None
            else f"変更 {facts.change} として作業を実施し、{facts.fix}しました。以降、再発していません。"
        ),
    }
    if facts.case is not None:
        english = facts.vendor_answer in family.vendor_answers_en
        notes["vendor"] = (
            f"Update from the vendor on case {facts.case}: {facts.vendor_answer}."
            if english
            else f"{family.vendor}から回答がありました（問い合わせ番号 {facts.case}）。{facts.vendor_answer}。"
        ) + ("\n\n" + _fact_log(rng, facts, textile, 12) if rng.random() < 0.3 else "")
    return notes


def _journals(
    rng: random.Random, ticket_id: int, facts: _Facts, shape: str, textile: bool, created: datetime
) -> list[dict[str, Any]]:
    count = {"short": rng.randint(1, 4), "medium": rng.randint(5, 9), "long": rng.randint(10, 40)}[shape]
    fact_notes = _fact_notes(rng, facts, textile)
    # Where each fact journal goes: the cause in the middle, the vendor's answer later, the fix near the end.
    slots: dict[int, str] = {count - 1: "fix"}
    if shape == "short":
        if count > 1:
            slots[rng.randrange(count - 1)] = "cause"
    else:
        slots[rng.randrange(count // 4, count // 2)] = "cause"
        free = [index for index in range(count // 2, count - 1) if index not in slots]
        slots[rng.choice(free)] = "vendor"
    journals = []
    moment = created
    for index in range(count):
        moment += timedelta(minutes=rng.randrange(20, 60 * 30))
        fact = slots.get(index)
        details: list[dict[str, Any]] = []
        private = False
        if fact is not None:
            notes = fact_notes[fact]
            facts.depth[fact] = index + 1
        elif rng.random() < 0.25:
            notes = ""
        elif rng.random() < 0.06:
            notes, private = "社内メモ: 利用者の上長にはまだ共有しないこと。" + _chatter(rng, facts.family, 1), True
        else:
            notes = _noise_note(rng, facts, textile)
        if not notes or rng.random() < 0.2:
            old, new = rng.sample(list(STATUSES), 2)
            details.append({"property": "attr", "name": "status_id", "old_value": str(old), "new_value": str(new)})
        if index == count - 1:
            details = [{"property": "attr", "name": "status_id", "old_value": "2", "new_value": "5"}]
        user = rng.choice(list(USERS))
        journals.append(
            {
                "id": ticket_id * 100 + index,
                "user": {"id": user, "name": USERS[user]},
                "notes": notes,
                "created_on": _timestamp(moment),
                "updated_on": _timestamp(moment),
                "private_notes": private,
                "details": details,
            }
        )
    return journals


def _issue(
    rng: random.Random, ticket_id: int, facts: _Facts, shape: str, created: datetime, private: bool, earlier: int | None
) -> dict[str, Any]:
    family = facts.family
    textile = created < _SWITCH_AT
    description = _description(rng, facts, shape, textile, created)
    if earlier is not None:
        description += f"\n\n#{earlier} と同じ {facts.host} での再発です。"
    journals = _journals(rng, ticket_id, facts, shape, textile, created)
    author, assignee = rng.sample(list(USERS), 2)
    project = 2 if family.category in (5, 6) else 1
    custom_fields = [
        {"id": 3, "name": CUSTOM_FIELDS[3], "value": rng.choice(["個人", "部署", "拠点全体"])},
        {"id": 5, "name": CUSTOM_FIELDS[5], "value": SITES[facts.site]},
        {"id": 7, "name": CUSTOM_FIELDS[7], "value": rng.choice(["ポータル", "電話", "メール", "監視アラート"])},
    ]
    if shape == "long":
        custom_fields.append({"id": 38, "name": CUSTOM_FIELDS[38], "value": f"MON-{rng.randrange(10**5, 10**6)}"})
    priority = rng.choice(list(PRIORITIES))
    closed = _timestamp(datetime.fromisoformat(journals[-1]["created_on"].replace("Z", "+00:00")))
    return {
        "id": ticket_id,
        "project": {"id": project, "name": PROJECTS[project][0]},
        "tracker": {"id": family.tracker, "name": TRACKERS[family.tracker]},
        "status": {"id": 5, "name": STATUSES[5], "is_closed": True},
        "priority": {"id": priority, "name": PRIORITIES[priority]},
        "author": {"id": author, "name": USERS[author]},
        "assigned_to": {"id": assignee, "name": USERS[assignee]},
        "category": {"id": family.category, "name": CATEGORIES[family.category]},
        "subject": rng.choice(family.subjects).format(site=SITES[facts.site]),
        "description": description,
        "start_date": created.date().isoformat(),
        "due_date": (created + timedelta(days=14)).date().isoformat(),
        "done_ratio": 100,
        "is_private": private,
        "estimated_hours": float(rng.randint(1, 16)),
        "custom_fields": custom_fields,
        "created_on": _timestamp(created),
        "updated_on": closed,
        "closed_on": closed,
        "attachments": [],
        "relations": (
            [
                {
                    "id": ticket_id * 10,
                    "issue_id": ticket_id,
                    "issue_to_id": earlier,
                    "relation_type": "relates",
                    "delay": None,
                }
            ]
            if earlier is not None
            else []
        ),
        "journals": journals,
    }


def _questions(
    rng: random.Random, ticket_id: int, facts: _Facts, shape: str, host_is_unique: bool, site_is_unique: bool
) -> list[Question]:
    """What an operator asks about a ticket. By host only if no other ticket is on that host; by site
    and topic (no identifier at all: the near-duplicates on other sites are the trap) only if the
    ticket is the topic's only one at that site."""
    family = facts.family
    host, symptom = facts.host, family.symptom
    asked: list[Question] = []

    def ask(kind: str, text: str, key: tuple[str, ...], answer: tuple[str, ...], depth: int) -> None:
        asked.append(Question(text, ticket_id, kind, key, answer, depth))

    if host_is_unique:
        ask(
            "fix-by-host",
            rng.choice(
                [
                    f"{host} の{symptom}はどう解決した？",
                    f"{host} で{symptom}が出ていた件、最終的な対処は？",
                    f"{host} の{symptom}、何をしたら直った？",
                ]
            ),
            (host,),
            (facts.fix,),
            0,
        )
    if shape == "short" or not host_is_unique or rng.random() < 0.5:
        ask(
            "fix-by-code",
            rng.choice([f"{facts.code} が出た件の恒久対策は？", f"エラー {facts.code} はどうやって解消した？"]),
            (facts.code,),
            (facts.fix,),
            0,
        )
    if facts.case is not None and facts.vendor_answer is not None:
        ask(
            "vendor-answer",
            rng.choice(
                [
                    f"{facts.case} でベンダーは何と回答した？",
                    f"ベンダー問い合わせ {facts.case} の回答内容を教えて",
                    f"What did the vendor say on case {facts.case}?",
                ]
            ),
            (facts.case,),
            (facts.vendor_answer,),
            facts.depth["vendor"],
        )
    if facts.change is not None:
        ask(
            "change",
            rng.choice([f"{facts.change} の作業内容は？", f"変更 {facts.change} では何をした？"]),
            (facts.change,),
            (facts.fix,),
            facts.depth["fix"],
        )
    if site_is_unique and rng.random() < 0.5:
        site = SITES[facts.site]
        choices = [(f"{site}の{symptom}はどう対処した？", facts.fix)]
        if "cause" in facts.depth:  # a short ticket may never say why
            choices.append((f"{site}で起きた{symptom}の件、原因は何だった？", facts.cause))
        text, answer = rng.choice(choices)
        ask("by-site", text, (site, symptom), (answer,), 0)
    if host_is_unique and shape != "short" and rng.random() < 0.6:
        ask(
            "cause",
            rng.choice(
                [
                    f"What was the root cause of the {family.symptom_en} on {host}?",
                    f"{host} の{symptom}の原因は何だった？",
                ]
            ),
            (host,),
            (facts.cause,),
            0,
        )
    return asked


def write_retrieval_snapshot(folder: Path, tickets: int = 160, seed: int = 0) -> RetrievalCorpus:
    """Write ``tickets`` tickets (a snapshot) in ``folder``; the ticket ids and the questions."""
    rng = random.Random(seed)
    unique = _Unique(rng)
    numbers: dict[tuple[str, str], list[int]] = {}
    plans: list[tuple[Family, str, str, int | None]] = []  # family, shape, host, index of the earlier ticket
    for index in range(tickets):
        family = FAMILIES[index % len(FAMILIES)]
        shape = ("short", "medium", "long")[rng.randrange(3)]
        same_family = [n for n, plan in enumerate(plans) if plan[0] is family]
        if same_family and rng.random() < 0.15:  # a recurrence on the host of an earlier ticket
            earlier = rng.choice(same_family)
            plans.append((family, shape, plans[earlier][2], earlier))
            continue
        site = rng.choice(list(SITES))
        taken = numbers.setdefault((site, family.role), [])
        number = rng.choice([n for n in range(1, 40) if n not in taken])
        taken.append(number)
        plans.append((family, shape, f"{site}-{family.role}-{number:02d}", None))
    rng.shuffle(plans)  # the families' tickets come in any order, as they do at a desk
    hosts = [plan[2] for plan in plans]
    sites = [(plan[0].key, plan[2].split("-")[0]) for plan in plans]
    moments = sorted(_FIRST_DAY + timedelta(minutes=rng.randrange(_DAYS * 24 * 60)) for _ in plans)
    ids: list[int] = []
    for _ in plans:
        ids.append((ids[-1] if ids else FIRST_ID - 1) + rng.randint(1, 6))
    by_host: dict[str, int] = {}
    issues = folder / "issues"
    issues.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    private_ids: list[int] = []
    for ticket_id, (family, shape, host, _), created in zip(ids, plans, moments):
        ticket_rng = random.Random(f"{seed}/{ticket_id}")
        facts = _Facts(
            family=family,
            site=host.split("-")[0],
            host=host,
            code=unique(family.code),
            cause=ticket_rng.choice(family.causes),
            fix=ticket_rng.choice(family.fixes).format(version=ticket_rng.choice(family.versions)),
        )
        if shape != "short":
            facts.case = unique("CASE-{n:07d}")
            facts.vendor_answer = ticket_rng.choice(family.vendor_answers + family.vendor_answers_en)
        if shape == "long":
            facts.change = unique("CHG{n:06d}")
        private = ticket_rng.random() < 0.04
        issue = _issue(ticket_rng, ticket_id, facts, shape, created, private, by_host.get(host))
        by_host.setdefault(host, ticket_id)
        (issues / f"{ticket_id}.json").write_text(
            json.dumps({"issue": issue}, ensure_ascii=False, indent=1), encoding="utf-8"
        )
        if private:
            private_ids.append(ticket_id)
        else:
            unique_site = sites.count((family.key, facts.site)) == 1
            questions += _questions(ticket_rng, ticket_id, facts, shape, hosts.count(host) == 1, unique_site)
    (folder / "lookups.json").write_text(json.dumps(lookups(), ensure_ascii=False, indent=1), encoding="utf-8")
    state = {
        "version": 1,
        "cursor": _timestamp(max(moments) + timedelta(days=40)),
        "text_format": [{"since": SWITCH, "format": "common_mark"}],
        "redmine_url": REDMINE_URL,
    }
    (folder / "state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
    return RetrievalCorpus(ids, private_ids, questions)


def public_text(issue: dict[str, Any]) -> str:
    """What a reader of the documents sees of an issue (private notes left out): subject,
    description, custom field values and journal notes."""
    fields = [str(field["value"]) for field in issue.get("custom_fields", [])]
    notes = [journal["notes"] or "" for journal in issue.get("journals", []) if not journal.get("private_notes")]
    return "\n".join([issue["subject"], issue.get("description") or "", *fields, *notes])
